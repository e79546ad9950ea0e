package e2e

import (
	"cmp"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

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
