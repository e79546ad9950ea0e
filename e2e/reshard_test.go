package e2e

// Resharding under load (docs/shards.md, "Resharding"): the relays of one generation (the plain
// slot, or N shards) publish while a writer commits; slot reshard --shards M makes generation M
// at a common start C; M new relays start at once and wait (the generation guard); the old
// relays are replaced by run --stop-at-lsn C, which exit 0; the old slots are dropped; the new
// relays go on. Nothing is lost, every key's first deliveries stay in commit order across the
// switch, and a row is published twice only if it committed at or after C (an old relay that
// ran on past C before it was replaced; the new generation publishes from C). With the old
// relays stopped before slot reshard, no row is published twice.

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

func TestReshardUnderLoadLosesNothingAndKeepsEachKeysOrder(t *testing.T) {
	for _, c := range []struct {
		from, to  int
		stopFirst bool
	}{{2, 3, false}, {0, 2, false}, {2, 3, true}} {
		name := fmt.Sprintf("%d_to_%d", c.from, c.to)
		if c.stopFirst {
			name += "_old_relays_stopped_first"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reshardUnderLoad(t, c.from, c.to, c.stopFirst)
		})
	}
}

var reshardStartRE = regexp.MustCompile(`starts at commit LSN ([0-9A-F]+/[0-9A-F]+)`)

// reshardUnderLoad moves from generation from to generation to while a writer commits. With
// stopFirst the old relays are stopped before slot reshard (docs/shards.md: then no row is
// published twice); without, they run on past C until each is replaced by its drain.
func reshardUnderLoad(t *testing.T, from, to int, stopFirst bool) {
	f := testenv.NewFixture(t)
	bin := testenv.Binary(t, true)
	env := f.SlotEnv()
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, code := testenv.Run(t, 60*time.Second, bin, env, args...)
		if code != 0 {
			t.Fatalf("cdc-relay %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	// Registered before any relay starts, so it runs after they are stopped.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = f.Pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE starts_with(slot_name::text, $1)`, f.Slot+"_s")
		for _, n := range []int{from, to} {
			for i := range n {
				_, _ = f.Pool.Exec(ctx, fmt.Sprintf(`DROP PUBLICATION IF EXISTS %s_s%dof%d`, f.Publication, i, n))
			}
		}
	})
	shardArgs := func(n, i int) []string {
		if n == 0 {
			return nil
		}
		return []string{"--shard", fmt.Sprintf("%d/%d", i, n)}
	}
	start := func(n, i int, more ...string) *testenv.Proc {
		a := append([]string{"run", "--dlq-topic", f.DLQ, "--status-interval", "1s"}, shardArgs(n, i)...)
		return testenv.Start(t, bin, env, append(a, more...)...)
	}
	relays := func(n int) int { return max(n, 1) }

	create := []string{"slot", "create", "--table", f.Table}
	if from > 0 {
		create = append(create, "--shards", strconv.Itoa(from))
	}
	cli(create...)
	var old []*testenv.Proc
	for i := range relays(from) {
		old = append(old, start(from, i))
	}
	cons := testenv.Consume(t, f.Topic)
	w := testenv.NewWriter(f.Pool, f.Table, f.Topic).Start(t, cons, 5*time.Millisecond)
	testenv.Eventually(t, 60*time.Second, "the old generation to publish 200 rows", func() bool { return len(cons.Records()) >= 200 })

	stopOld := func() {
		for i, p := range old {
			if code := p.Stop(t); code != 0 {
				t.Fatalf("old relay %d: exit %d on SIGTERM:\n%s", i, code, p.Output())
			}
		}
	}
	if stopFirst {
		stopOld()
	}
	out := cli("slot", "reshard", "--table", f.Table, "--shards", strconv.Itoa(to))
	m := reshardStartRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("slot reshard printed no start LSN:\n%s", out)
	}
	at, err := pglogrepl.ParseLSN(m[1])
	if err != nil {
		t.Fatal(err)
	}
	// Run again, it says the same C, though the old relays confirmed past it meanwhile.
	if !stopFirst {
		testenv.Eventually(t, 30*time.Second, "an old slot to confirm past C", func() bool { return slotPosition(t, f, oldSlot(f.Slot, from)) > at })
	}
	if again := cli("slot", "reshard", "--table", f.Table, "--shards", strconv.Itoa(to)); !strings.Contains(again, "starts at commit LSN "+at.String()) {
		t.Errorf("slot reshard run again does not say the same start %s:\n%s", at, again)
	}

	// The new relays start before the old ones are drained: the guard holds them.
	var fresh []*testenv.Proc
	for i := range to {
		fresh = append(fresh, start(to, i))
	}
	for i, p := range fresh {
		testenv.Eventually(t, 60*time.Second, fmt.Sprintf("new relay %d to wait for the old generation", i), func() bool {
			return strings.Contains(p.Output(), "slots of another generation of this outbox exist")
		})
	}

	if !stopFirst {
		stopOld()
	}
	for i := range old {
		d := start(from, i, "--stop-at-lsn", at.String())
		if code, _ := d.Wait(t, 120*time.Second); code != 0 {
			t.Fatalf("old relay %d with --stop-at-lsn %s: exit %d, want 0:\n%s", i, at, code, d.Output())
		}
	}
	for i, p := range fresh {
		if strings.Contains(p.Output(), "starting to publish") || strings.Contains(p.Output(), "msg=streaming") {
			t.Errorf("new relay %d started while the old slots exist:\n%s", i, p.Output())
		}
	}
	drop := []string{"slot", "drop", "--publication", f.Publication}
	if from > 0 {
		drop = append(drop, "--shards", strconv.Itoa(from))
	}
	cli(drop...)
	for i, p := range fresh {
		testenv.Eventually(t, 60*time.Second, fmt.Sprintf("new relay %d to start publishing", i), func() bool {
			return strings.Contains(p.Output(), "the other generation's slots are gone: starting to publish")
		})
	}

	recs, dups := w.Finish(t, 300, "300 more rows after the switch", 120*time.Second)
	// A row twice is one that an old relay published after C before it was replaced, and the new
	// generation from C: never one committed before C, which only the old generation streams.
	before, twice := 0, map[string]bool{}
	for id, n := range ids(recs) {
		if n > 1 {
			twice[id] = true
		}
	}
	for _, r := range recs {
		id := testenv.Header(r, "outbox-id")
		if lsn := lsnOf(t, r); lsn < at {
			before++
			if twice[id] {
				t.Errorf("outbox id %s committed at %s, before the new generation's start %s, was published twice", id, lsn, at)
			}
		}
	}
	if before == 0 || before == len(recs) {
		t.Errorf("%d of %d records committed before C=%s: the switch was not under load", before, len(recs), at)
	}
	if stopFirst && dups != 0 {
		t.Errorf("%d duplicates, though the old relays stopped before slot reshard: want none", dups)
	}
	t.Logf("from %d to %d at %s: %d records, %d committed before C, %d duplicates (all committed at or after C)", from, to, at, len(recs), before, dups)
}

// oldSlot is the first slot of the old generation.
func oldSlot(base string, from int) string {
	if from == 0 {
		return base
	}
	return fmt.Sprintf("%s_s0of%d", base, from)
}

func slotPosition(t *testing.T, f *testenv.Fixture, slot string) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := f.Pool.QueryRow(context.Background(), `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s); err != nil {
		t.Fatalf("read slot %s: %v", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// slot reshard refuses, with exit 2 and what to do, a call without --shards, a --from equal
// to --shards, and a base name with no other generation to move from.
func TestSlotReshardRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t)
	bin := testenv.Binary(t, false)
	env := f.SlotEnv()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--table", f.Table}, "--shards M is required"},
		{[]string{"--table", f.Table, "--shards", "2", "--from", "2"}, "--from 2"},
		{[]string{"--table", f.Table, "--shards", "2"}, "slot create --shards 2"},
	} {
		_, errOut, code := testenv.Run(t, 30*time.Second, bin, env, append([]string{"slot", "reshard"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("slot reshard %v: exit %d, want 2 with %q:\n%s", c.args, code, c.want, errOut)
		}
	}
	var n int
	if err := f.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE starts_with(slot_name::text, $1)`, f.Slot).Scan(&n); err != nil || n != 0 {
		t.Errorf("a refused slot reshard left %d slots (%v)", n, err)
	}
}
