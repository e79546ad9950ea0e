package e2e

// The commands the README and docs/ show work as written: every make command they show is one
// the Makefile runs, the make targets behave as documented, the README's five-minute tour runs
// verbatim, and the seed's demo script runs end to end.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// makeCommand is one `make ...` command the README shows: its targets and its variables.
type makeCommand struct {
	line    int
	targets []string
	vars    []string
}

var (
	codeSpan = regexp.MustCompile("(?s)`([^`]+)`")
	fence    = regexp.MustCompile("(?m)^```[a-z]*\n((?s:.*?))^```") //nolint:gocritic // (?m): each ^ is a line's start
)

// readmeMakeCommands returns every make command in md: inline code spans and lines of fenced
// blocks that start with "make ". A command ends at a shell comment or operator.
func readmeMakeCommands(md string) []makeCommand {
	var cmds []makeCommand
	add := func(text string, offset int) {
		f := strings.Fields(text)
		if len(f) < 2 || f[0] != "make" {
			return
		}
		c := makeCommand{line: 1 + strings.Count(md[:offset], "\n")}
	words:
		for _, w := range f[1:] {
			switch {
			case strings.HasPrefix(w, "#"), w == "&&", w == "||", w == ";", w == "|":
				break words
			case strings.HasPrefix(w, "-"):
			case strings.Contains(w, "="):
				c.vars = append(c.vars, w)
			default:
				c.targets = append(c.targets, w)
			}
		}
		cmds = append(cmds, c)
	}
	// Fenced blocks first, then the code spans of the text around them.
	prose := []byte(md)
	for _, m := range fence.FindAllStringSubmatchIndex(md, -1) {
		body := md[m[2]:m[3]]
		off := m[2]
		for _, l := range strings.SplitAfter(body, "\n") {
			add(l, off)
			off += len(l)
		}
		copy(prose[m[0]:m[1]], bytes.Repeat([]byte{' '}, m[1]-m[0]))
	}
	for _, m := range codeSpan.FindAllStringSubmatchIndex(string(prose), -1) {
		add(md[m[2]:m[3]], m[2])
	}
	return cmds
}

// cleanMakeEnv is the environment without what an enclosing make (make test) or the caller
// would pass on to make and the seed script: the test sets those itself.
func cleanMakeEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "MAKEFLAGS", k == "MFLAGS", k == "MAKELEVEL", k == "MAKEOVERRIDES",
			k == "COUNT", k == "MODE", k == "BATCH_SIZE", k == "TIMEOUT", strings.HasPrefix(k, "SEED_"):
		default:
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TestReadmeMakeTargetsExist fails when README.md or a page of docs/ shows a make command that
// the Makefile cannot run (make -n: the recipe is printed, nothing is executed).
func TestReadmeMakeTargetsExist(t *testing.T) {
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		rel, _ := filepath.Rel(root, path)
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range readmeMakeCommands(string(md)) {
			args := append([]string{"-n", "--no-print-directory"}, c.targets...)
			args = append(args, c.vars...)
			cmd := exec.Command("make", args...)
			cmd.Dir = root
			cmd.Env = cleanMakeEnv()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s:%d: make %s: %v\n%s", rel, c.line, strings.Join(append(c.targets, c.vars...), " "), err, out)
			}
			for _, tg := range c.targets {
				seen[tg] = true
			}
		}
	}
	// The extraction itself: the commands the README and docs/ are known to show must be among them.
	for _, want := range []string{"demo", "test", "unit", "test-matrix", "bench", "faults", "faults-full", "chaos", "seed-demo",
		"db-init", "topic-create", "run-service", "run-publisher", "run-consumer", "dup-count", "end-offsets", "image", "lint"} {
		if !seen[want] {
			t.Errorf("neither README.md nor docs/ shows `make %s` any more (or the extraction missed it); found %v", want, seen)
		}
	}
}

func TestReadmeMakeCommandsExtraction(t *testing.T) {
	md := "intro `make demo COUNT=5` and `go test`\n```sh\nmake a b X=1   # c d\nls\n```\nsplit `make e\nf -n` end\n"
	got := readmeMakeCommands(md)
	want := []string{"a b X=1", "demo COUNT=5", "e f"}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %v", got, want)
	}
	for i, c := range got {
		if s := strings.Join(append(c.targets, c.vars...), " "); s != want[i] {
			t.Errorf("command %d: got %q, want %q", i, s, want[i])
		}
	}
}

// TestMakeUnitNeedsNoServices runs `make unit` (go test ./... with the services' variables
// unset) with the services' addresses pointing at a port nothing listens on and CI=true: every
// test that does not stop at testenv.Require passes without PostgreSQL and Kafka, so a test
// that reaches a service without asking the gate first fails here; and the pure tests of every
// package ran, those inside service packages too.
func TestMakeUnitNeedsNoServices(t *testing.T) {
	if os.Getenv("CDC_RELAY_IN_MAKE_UNIT") != "" {
		t.Skip("this test runs make unit: not again inside it")
	}
	t.Parallel()
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "unit")
	cmd.Dir = root
	cmd.Env = cleanMakeEnv("CDC_RELAY_PG_URL=postgres://nobody@127.0.0.1:1/none?connect_timeout=1",
		"CDC_RELAY_BROKERS=127.0.0.1:1", "CI=true", testenv.RequireServicesEnv+"=1",
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -v"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make unit without services: %v\n%s", err, out)
	}
	for _, pkg := range []string{"decoder", "outbox", "relay", "sink", "slotstore", "poller", "inbox"} {
		if !regexp.MustCompile(`(?m)^ok\s+github.com/cdc-relay/cdc-relay/` + pkg + `\s`).Match(out) {
			t.Errorf("make unit did not test %s:\n%s", pkg, out)
		}
	}
	// The pure tests inside service packages ran (-v lists them), and a service test skipped.
	for _, name := range []string{"TestValidateName", "TestIndexName", "TestExtractTrace"} {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name).Match(out) {
			t.Errorf("make unit did not run %s:\n%s", name, out)
		}
	}
	if !regexp.MustCompile(`(?m)^\s*--- SKIP: `).Match(out) || !bytes.Contains(out, []byte("needs PostgreSQL: CDC_RELAY_PG_URL not set")) {
		t.Errorf("make unit skipped no service test with the gate's reason:\n%s", out)
	}
}

// TestSeedMakeTargets runs the seed demo's cheap steps through make, in order, against the
// local services, with its own schema, slot, topic and group, and checks what each prints.
func TestSeedMakeTargets(t *testing.T) {
	t.Parallel()
	name := testenv.Name(t)
	root := repoRoot(t)
	topic := name + ".orders"
	vars := []string{"MODE=cdc", "SEED_SCHEMA=" + name, "SEED_TOPIC=" + topic, "SEED_SLOT=" + name,
		"SEED_GROUP=" + name, "SEED_BIN=" + t.TempDir(), "TIMEOUT=1m"}
	cleanUpSeedDemo(t, root, name, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// run runs one make target and returns its standard output.
	run := func(target string, extra ...string) string {
		t.Helper()
		args := append([]string{"--no-print-directory", target}, vars...)
		cmd := exec.CommandContext(ctx, "make", append(args, extra...)...)
		cmd.Dir = root
		cmd.Env = cleanMakeEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("make %s: %v\nstdout:\n%s\nstderr:\n%s", target, err, stdout.String(), stderr.String())
		}
		t.Logf("make %s: %s", target, finalLine(stdout.String()))
		return stdout.String()
	}
	expect := func(target, out, want string) {
		t.Helper()
		if !strings.Contains(out, want) {
			t.Fatalf("make %s printed:\n%s\nwant it to contain %q", target, out, want)
		}
	}

	out := run("db-init") // builds the binaries into SEED_BIN; the later steps reuse them
	vars = append(vars, "SEED_NO_BUILD=1")
	expect("db-init", out, "created slot "+name)
	expect("topic-create", run("topic-create"), "created topic "+topic+" (3 partitions)")
	out = run("run-service", "COUNT=20")
	expect("run-service", out, "wrote 20 orders\n")
	if n := strings.Count(out, "ORDER order-"); n != 20 {
		t.Fatalf("make run-service COUNT=20 printed %d ORDER lines, want 20:\n%s", n, out)
	}
	for _, step := range []string{"db-count", "outbox-count", "outbox-pending"} {
		if out := run(step); out != "20\n" {
			t.Fatalf("make %s printed %q, want 20", step, out)
		}
	}
	// The relay runs until the slot confirmed the WAL written so far (every row is in Kafka), then stops.
	expect("run-publisher", run("run-publisher"), "published=20 ")
	if out := run("outbox-pending"); out != "0\n" {
		t.Fatalf("make outbox-pending after run-publisher printed %q, want 0", out)
	}
	// The consumer reads until it reached the topic's end offsets, then stops.
	out = run("run-consumer")
	expect("run-consumer", out, "processed=20 inserted=20 skipped=0\n")
	if out := run("dup-count"); out != "20\n" {
		t.Fatalf("make dup-count printed %q, want 20", out)
	}
	expect("end-offsets", run("end-offsets"), "\ntotal 20\n")
}

// finalLine is the last line of a command's output.
func finalLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// TestMakeTestMatrix runs `make test-matrix` on the PostgreSQL 15 the suite already uses, with one
// cheap test instead of the core tests (CI runs the whole matrix as the last stage of make test):
// the target builds the tests, runs them against that version's server, leaves a server it did not
// start running, and prints its table. Bad choices fail before anything runs, saying what to do.
// The core tests the matrix names by default must be tests of this package.
func TestMakeTestMatrix(t *testing.T) {
	t.Parallel()
	pool := testenv.Pool(t)
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	matrix := func(vars ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, "make", append([]string{"--no-print-directory", "test-matrix"}, vars...)...)
		cmd.Dir = root
		cmd.Env = cleanMakeEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	// The default list names tests that exist (the script checks it too, but only once it runs).
	script, err := os.ReadFile(filepath.Join(root, "scripts", "test-matrix.sh"))
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`(?s)default_tests=\((.*?)\)`).FindSubmatch(script)
	if list == nil {
		t.Fatal("scripts/test-matrix.sh has no default_tests=( ... ) list")
	}
	names := strings.Fields(string(list[1]))
	var src strings.Builder
	files, _ := filepath.Glob("*_test.go")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for _, n := range names {
		if !strings.Contains(src.String(), "\nfunc "+n+"(t *testing.T)") {
			t.Errorf("scripts/test-matrix.sh runs %s, which is not a test in e2e/", n)
		}
	}
	for _, core := range []string{"TestKill9AfterKafkaAckReplaysWithoutLoss", "TestMillionRowTransactionInBoundedMemory", "TestSlotCLILifecycle"} {
		if !slices.Contains(names, core) {
			t.Errorf("the matrix no longer runs %s; it runs %v", core, names)
		}
	}

	if _, stderr, err := matrix("PG_VERSIONS=13"); err == nil || !strings.Contains(stderr, "13 is not a PostgreSQL major this project runs: use some of 14 15 16 17 18") {
		t.Errorf("make test-matrix PG_VERSIONS=13: %v, want a failure naming the versions\n%s", err, stderr)
	}
	if _, stderr, err := matrix("PG_VERSIONS=15", "MATRIX_TESTS=TestNoSuchTest"); err == nil ||
		!strings.Contains(stderr, "CDC_RELAY_MATRIX_TESTS names TestNoSuchTest, which is not a test in e2e/") {
		t.Errorf("make test-matrix MATRIX_TESTS=TestNoSuchTest: %v, want a failure naming the test\n%s", err, stderr)
	}

	stdout, stderr, err := matrix("PG_VERSIONS=15", "MATRIX_TESTS=TestReadmeMakeCommandsExtraction")
	if err != nil {
		t.Fatalf("make test-matrix PG_VERSIONS=15: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !regexp.MustCompile(`(?m)^15 +15\.[0-9]+ +ok +[0-9]+s$`).MatchString(stdout) ||
		!strings.Contains(stderr, "[pg15] --- PASS: TestReadmeMakeCommandsExtraction") {
		t.Errorf("make test-matrix printed no passing line for 15:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if strings.Contains(stderr, "stopping postgres 15") {
		t.Errorf("make test-matrix stopped the PostgreSQL 15 it did not start:\n%s", stderr)
	}
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("PostgreSQL 15 no longer serves after make test-matrix: %v", err)
	}
}

// tourHeading is the README section whose shell blocks TestReadmeTourRunsVerbatim runs: found
// by its heading, not by line numbers, so the README can be reorganised around it.
var tourHeading = regexp.MustCompile(`(?m)^(#+) Five-minute tour\s*$`)

// readmeSection returns the fenced sh blocks of the section under heading in md, up to the next
// heading of the same or a higher level (lines in fenced blocks are never headings: a shell
// comment starts with '#' too).
func readmeSection(t *testing.T, md string, heading *regexp.Regexp) []string {
	t.Helper()
	m := heading.FindStringSubmatchIndex(md)
	if m == nil {
		t.Fatalf("README has no heading matching %s", heading)
	}
	level := m[3] - m[2]
	var blocks []string
	var block strings.Builder
	fenced, sh := false, false
lines:
	for _, line := range strings.SplitAfter(md[m[1]:], "\n") {
		switch {
		case strings.HasPrefix(line, "```") && !fenced:
			fenced, sh = true, strings.TrimSpace(line) == "```sh"
			block.Reset()
		case strings.HasPrefix(line, "```"):
			fenced = false
			if sh {
				blocks = append(blocks, block.String())
			}
		case fenced:
			block.WriteString(line)
		case strings.HasPrefix(line, "#"):
			if n := len(line) - len(strings.TrimLeft(line, "#")); n <= level && strings.HasPrefix(line[n:], " ") {
				break lines
			}
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("README's %s section has no ```sh block", heading)
	}
	return blocks
}

// The README's five-minute tour, run verbatim against the dev services: it must publish the
// row it writes, with the contract's headers, and leave no slot behind. It pins the tour that
// wrote a row for a topic nothing created (brew.orders.v1), with a dead-letter topic that did
// not exist either: the relay held the row as an outage, and the tour's clean-up dropped the
// slot that still owed it (the tour now runs the relay with --create-topics and waits for the
// slot to confirm before it stops the relay).
//
// Not parallel: the tour uses fixed names (public.outbox, orders_relay, orders_outbox).
func TestReadmeTourRunsVerbatim(t *testing.T) {
	root := repoRoot(t)
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script := strings.Join(readmeSection(t, string(md), tourHeading), "\n")
	pool := testenv.Pool(t)
	ctx := context.Background()
	t.Cleanup(func() {
		// A tour that failed half-way leaves its slot: drop it, or it pins WAL for good.
		_, _ = pool.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'orders_relay' AND NOT active`)
	})
	// As on fresh services (a new clone's dev-up.sh): neither the row's topic nor the
	// dead-letter topic exists.
	adm := kadm.NewClient(testenv.Kafka(t))
	if _, err := adm.DeleteTopics(ctx, "brew.orders.v1", "cdc-relay.dlq"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the tour's topics deleted", func() bool {
		td, err := adm.ListTopics(ctx, "brew.orders.v1", "cdc-relay.dlq")
		for _, d := range td {
			err = cmp.Or(err, d.Err)
		}
		return errors.Is(err, kerr.UnknownTopicOrPartition)
	})
	cons := testenv.Consume(t, "brew.orders.v1")

	// The tour's own environment: what dev-up.sh prints, not the test's CDC_RELAY_* settings
	// (only the dev services' ports, which say which services dev-up.sh finds).
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CDC_RELAY_") && !strings.HasPrefix(kv, "CDC_RELAY_DEV_") {
			continue
		}
		env = append(env, kv)
	}
	tctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(tctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = root, env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tour failed: %v\n%s", err, out)
	}
	for _, bad := range []string{"level=ERROR", "not acknowledging", "dead-lettering", "dead-lettered until",
		"min.insync.replicas is 1", "one replica on a cluster"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("the tour's output has %q:\n%s", bad, out)
		}
	}

	var id int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM public.outbox WHERE aggregate_id = 'order-42'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatInt(id, 10)
	recs := cons.WaitFor(t, 30*time.Second, "the tour's row on brew.orders.v1", func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if testenv.Header(r, "outbox-id") == want && testenv.Header(r, "outbox-table") == "public.outbox" {
				return true
			}
		}
		return false
	})
	for _, r := range recs {
		if testenv.Header(r, "outbox-id") != want || testenv.Header(r, "outbox-table") != "public.outbox" {
			continue
		}
		if string(r.Key) != "order-42" || string(r.Value) != `{"order_id": 42}` || testenv.Header(r, "event-type") != "order.created" ||
			testenv.Header(r, "correlation-id") != "c-1" {
			t.Errorf("the tour's record: key %q value %q headers %v", r.Key, r.Value, r.Headers)
		}
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'orders_relay'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("the tour left its slot (%d, %v)", left, err)
	}
	t.Logf("tour output:\n%s", out)
}

// The seed's demo (seed 000) end to end, for the relay and for the polling publisher: COUNT
// orders, a publisher killed after Kafka acknowledged a batch, a normal publisher, and the
// inbox consumer. The script checks processed = unique + duplicates, unique = orders, and
// that the chaos run left duplicates; the test checks its closing line.
func TestSeedDemoAbsorbsDuplicates(t *testing.T) {
	for _, mode := range []string{"cdc", "poll"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			name := testenv.Name(t)
			root := repoRoot(t)
			env := []string{"MODE=" + mode, "COUNT=20", "BATCH_SIZE=5", "SEED_SCHEMA=" + name, "SEED_TOPIC=" + name + ".orders",
				"SEED_SLOT=" + name, "SEED_GROUP=" + name, "SEED_BIN=" + t.TempDir()}
			cleanUpSeedDemo(t, root, name, name+".orders")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "seed-demo.sh"), "all")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("seed-demo.sh all (%s): %v\n%s", mode, err, out)
			}
			text := string(out)
			if !strings.Contains(text, "OK ("+mode+"): 20 orders") || !strings.Contains(text, "inserted=20") {
				t.Fatalf("unexpected output:\n%s", text)
			}
			for _, line := range strings.Split(text, "\n") {
				if strings.HasPrefix(line, "processed=") || strings.HasPrefix(line, "OK (") {
					t.Log(line)
				}
			}
		})
	}
}

// cleanUpSeedDemo removes, when the test ends, what scripts/seed-demo.sh made for a test whose
// SEED_SCHEMA, SEED_SLOT and SEED_GROUP are name and SEED_TOPIC topic: the slot (once inactive),
// the publication and schema, the topic and its dead-letter topic, the group, and the
// publisher's log under root/.dev.
func cleanUpSeedDemo(t *testing.T, root, name, topic string) {
	t.Helper()
	pool := testenv.Pool(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, name)
		_, _ = pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{name}.Sanitize())
		_, _ = pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`)
		adm := kadm.NewClient(testenv.Kafka(t))
		_, _ = adm.DeleteTopics(ctx, topic, topic+".dlq")
		_, _ = adm.DeleteGroups(ctx, name)
		_ = os.Remove(filepath.Join(root, ".dev", "seed-"+name+"-publisher.log"))
	})
}
