package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// stopClean stops p (SIGTERM) and fails the test unless it exited 0; who names the run in the
// failure ("the relay", "the restart").
func stopClean(t *testing.T, p *testenv.Proc, who string) {
	t.Helper()
	if code := p.Stop(t); code != 0 {
		t.Fatalf("%s exited %d; output:\n%s", who, code, p.Output())
	}
}

// ids maps outbox ids (as text) to how many records carry them.
func ids(recs []*kgo.Record) map[string]int {
	m := make(map[string]int, len(recs))
	for _, r := range recs {
		m[testenv.Header(r, "outbox-id")]++
	}
	return m
}

// hasAll reports whether every id in want has arrived.
func hasAll(want []int64) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		got := ids(recs)
		for _, id := range want {
			if got[strconv.FormatInt(id, 10)] == 0 {
				return false
			}
		}
		return true
	}
}

func lsnOf(t *testing.T, r *kgo.Record) pglogrepl.LSN {
	t.Helper()
	lsn, err := pglogrepl.ParseLSN(testenv.Header(r, "cdc-lsn"))
	if err != nil {
		t.Fatalf("record %s: cdc-lsn %q: %v", testenv.Header(r, "outbox-id"), testenv.Header(r, "cdc-lsn"), err)
	}
	return lsn
}

func lsnLess(t *testing.T, a, b string) bool {
	t.Helper()
	x, err1 := pglogrepl.ParseLSN(a)
	y, err2 := pglogrepl.ParseLSN(b)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad LSNs %q %q", a, b)
	}
	return x < y
}

// assertCleanDelivery checks a clean run (no crash): every record's outbox id arrived exactly
// once, one record per committed row, and no row of a rolled-back transaction. It returns the
// count per id.
func assertCleanDelivery(t *testing.T, recs []*kgo.Record, committed, rolledBack []int64) map[string]int {
	t.Helper()
	got := ids(recs)
	for _, id := range rolledBack {
		if got[strconv.FormatInt(id, 10)] != 0 {
			t.Errorf("row %d of a rolled-back transaction was published", id)
		}
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("outbox id %s published %d times in a clean run", id, n)
		}
	}
	if len(recs) != len(committed) {
		t.Errorf("got %d records, want %d", len(recs), len(committed))
	}
	return got
}

// landedAfterNewHolder returns how many records ce_source old produced, and those of them that
// landed in their partition after ce_source holder's first record of the same key.
func landedAfterNewHolder(recs []*kgo.Record, old, holder string) (byOld int, late []*kgo.Record) {
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(x, y *kgo.Record) int {
		return cmp.Or(cmp.Compare(x.Partition, y.Partition), cmp.Compare(x.Offset, y.Offset))
	})
	took := map[string]bool{}
	for _, r := range recs {
		switch testenv.Header(r, "ce_source") {
		case holder:
			took[string(r.Key)] = true
		case old:
			byOld++
			if took[string(r.Key)] {
				late = append(late, r)
			}
		}
	}
	return byOld, late
}

// keyOrder checks the records of each key as they are read: one partition per key, and its
// ids in commit order.
type keyOrder struct {
	partition map[string]int32
	last      map[string]int64
}

func newKeyOrder() *keyOrder {
	return &keyOrder{partition: map[string]int32{}, last: map[string]int64{}}
}

// check takes r, the record of row id with key key.
func (o *keyOrder) check(t *testing.T, key string, id int64, r *kgo.Record) {
	t.Helper()
	if p, ok := o.partition[key]; ok && p != r.Partition {
		t.Errorf("key %s in partitions %d and %d", key, p, r.Partition)
	}
	o.partition[key] = r.Partition
	if id <= o.last[key] {
		t.Errorf("key %s: id %d arrived after %d", key, id, o.last[key])
	}
	o.last[key] = id
}

// insertInterleavedTxns commits 40 transactions of 5 rows each over 7 keys, so that every
// transaction holds several keys and every key spans transactions, and returns their ids.
func insertInterleavedTxns(t *testing.T, f *testenv.Fixture) []int64 {
	t.Helper()
	var all []int64
	for i := 0; i < 40; i++ {
		var rows []testenv.Row
		for j := 0; j < 5; j++ {
			rows = append(rows, testenv.Row{Key: fmt.Sprintf("agg-%d", (i+j)%7), Payload: fmt.Sprintf(`{"tx": %d, "row": %d}`, i, j)})
		}
		all = append(all, f.Insert(t, false, rows...)...)
	}
	return all
}

// repoRoot is the repository's root, the parent of this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// tableOfItsOwn creates the table f.Table+suffix as def (a column list in parentheses, or AS
// a query) and drops it when the test ends.
func tableOfItsOwn(t *testing.T, f *testenv.Fixture, suffix, def string) string {
	t.Helper()
	name := f.Table + suffix
	if _, err := f.Pool.Exec(context.Background(), `CREATE TABLE `+name+` `+def); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+name) })
	return name
}

// deleteTableLettersAtEnd deletes, when the test ends, the letters its slot parked in the
// dead-letter table public.cdc_relay_dead_letters, which other tests share.
func deleteTableLettersAtEnd(t *testing.T, f *testenv.Fixture) {
	t.Cleanup(func() {
		if _, err := f.Pool.Exec(context.Background(), `DELETE FROM public.cdc_relay_dead_letters WHERE slot = $1`, f.Slot); err != nil {
			t.Errorf("clean up the dead-letter table: %v", err)
		}
	})
}

// byOutboxID indexes recs by their outbox-id header (of two records with one id, the later).
func byOutboxID(recs []*kgo.Record) map[string]*kgo.Record {
	m := map[string]*kgo.Record{}
	for _, r := range recs {
		m[testenv.Header(r, "outbox-id")] = r
	}
	return m
}

// javaLines runs the Java program src (a source file, by its path from the repository root)
// with the schema registry's jars on the class path (Kafka's Java client and Apache Avro, with
// their codec libraries) and returns the lines it prints; does says what the program does,
// for the failures.
func javaLines(t *testing.T, does, src string, args ...string) []string {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java is needed to %s: %v", does, err)
	}
	jars := testenv.RegistryJars(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, append([]string{"-cp", filepath.Join(jars, "*"), filepath.Join(repoRoot(t), src)}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Java could not %s: %v\n%s", does, err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}
