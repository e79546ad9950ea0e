package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/slotstore"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// newShards makes a fixture and runs slot create --shards n on its table with the binary (built
// with the race detector when race is set) and env, which names the fixture's slot and
// publication. The shards' slots and publications are dropped at cleanup (after the relays
// started later have stopped).
func newShards(t *testing.T, race bool, n int) (f *testenv.Fixture, bin string, env []string) {
	t.Helper()
	f = testenv.NewFixture(t)
	bin, env = testenv.Binary(t, race), f.SlotEnv()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, sh := range slotstore.AllShards(n) {
			for ctx.Err() == nil {
				_, err := f.Pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, sh.Slot(f.Slot))
				if err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond) // a killed relay's walsender may still hold it
			}
			_, _ = f.Pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{sh.Publication(f.Publication)}.Sanitize())
		}
	})
	out, errOut, code := testenv.Run(t, 60*time.Second, bin, env, "slot", "create", "--table", f.Table, "--shards", fmt.Sprint(n))
	if code != 0 {
		t.Fatalf("slot create --shards %d: exit %d\n%s%s", n, code, out, errOut)
	}
	return f, bin, env
}

// shardOfKeys is the shard of each key out of n, as the server computes it for the shards'
// publications.
func shardOfKeys(t *testing.T, f *testenv.Fixture, keys []string, n int) map[string]int {
	t.Helper()
	rows, err := f.Pool.Query(context.Background(), `SELECT k, (hashtext(k) & 2147483647) % $2 FROM unnest($1::text[]) k`, keys, n)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var k string
		var s int
		if err := rows.Scan(&k, &s); err != nil {
			t.Fatal(err)
		}
		out[k] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Three shard relays on one topic while rows keep coming; shard 1's relay is killed with
// kill -9 mid-load and restarted while the other two go on. Nothing committed is lost, every
// key's rows arrive in commit order, and each relay process (each Kafka producer id) published
// only the keys of its own shard: no row went out through two shards.
func TestShardRelaysSurviveKill9OfOneAndPublishEachKeyThroughItsShard(t *testing.T) {
	t.Parallel()
	f, bin, env := newShards(t, true, 3)
	status, errOut, code := testenv.Run(t, 30*time.Second, bin, env, "slot", "status")
	for _, sh := range slotstore.AllShards(3) {
		if code != 0 || !strings.Contains(status, sh.Slot(f.Slot)) {
			t.Fatalf("slot status: exit %d, does not list %s:\n%s%s", code, sh.Slot(f.Slot), status, errOut)
		}
	}

	cons := testenv.Consume(t, f.Topic)
	start := func(i int) *testenv.Proc {
		return testenv.Start(t, bin, env, "run", "--dlq-topic", f.DLQ, "--status-interval", "1s", "--shard", fmt.Sprintf("%d/3", i))
	}
	relays := []*testenv.Proc{start(0), start(1), start(2)}

	const nkeys = 40
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	shardOf := shardOfKeys(t, f, keys, 3)
	used := map[int]bool{}
	for _, s := range shardOf {
		used[s] = true
	}
	if len(used) != 3 {
		t.Fatalf("the load's keys fall in shards %v only: the test would not exercise every shard", used)
	}
	w := testenv.NewWriter(f.Pool, f.Table, f.Topic)
	ctx, cancel := context.WithCancel(context.Background())
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		for i := 0; ctx.Err() == nil; i++ {
			if w.Tx(ctx, 1+i%5, nkeys) != nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-loaded })

	// Mid-load: every shard has published, then shard 1's relay dies.
	shardsSeen := func(recs []*kgo.Record, since map[string]bool) map[int]int {
		n := map[int]int{}
		for _, r := range recs {
			if id := testenv.Header(r, "outbox-id"); !since[id] {
				n[shardOf[string(r.Key)]]++
			}
		}
		return n
	}
	cons.WaitFor(t, 90*time.Second, "records of every shard", func(recs []*kgo.Record) bool {
		n := shardsSeen(recs, nil)
		return n[0] > 20 && n[1] > 20 && n[2] > 20
	})
	if !strings.Contains(relays[0].Output(), "shard 0 publishes them all") {
		t.Errorf("a shard relay does not say where logical messages go:\n%s", relays[0].Output())
	}
	relays[1].Kill(t, 30*time.Second)
	before := map[string]bool{}
	for _, r := range cons.Records() {
		before[testenv.Header(r, "outbox-id")] = true
	}
	// The other shards go on while shard 1 is down.
	cons.WaitFor(t, 90*time.Second, "shards 0 and 2 publishing while shard 1's relay is down", func(recs []*kgo.Record) bool {
		n := shardsSeen(recs, before)
		return n[0] > 20 && n[2] > 20
	})
	relays[1] = start(1)
	committed := len(w.Committed())
	testenv.Eventually(t, 90*time.Second, "more rows committed after the restart", func() bool { return len(w.Committed()) >= committed+200 })
	cancel()
	<-loaded

	cons.WaitFor(t, 120*time.Second, "every committed row", testenv.HasAll(w.Committed()))
	recs := cons.WaitFor(t, 60*time.Second, "every record on the topic", func(recs []*kgo.Record) bool {
		return int64(len(recs)) >= testenv.EndOffset(t, f.Topic)
	})
	dups := w.Verify(t, recs) // nothing lost, nothing rolled back delivered, per-key commit order

	// Each producer (a relay process: three, and shard 1's after its restart) published the
	// keys of one shard only.
	byProducer := map[int64]map[int]int{}
	for _, r := range recs {
		if byProducer[r.ProducerID] == nil {
			byProducer[r.ProducerID] = map[int]int{}
		}
		byProducer[r.ProducerID][shardOf[string(r.Key)]]++
	}
	shardsWithProducers := map[int]int{}
	for pid, shards := range byProducer {
		if len(shards) != 1 {
			t.Errorf("producer %d published keys of several shards (records per shard: %v): a row went out through a shard not its own", pid, shards)
		}
		for s := range shards {
			shardsWithProducers[s]++
		}
	}
	if len(byProducer) < 4 || shardsWithProducers[1] < 2 || shardsWithProducers[0] < 1 || shardsWithProducers[2] < 1 {
		t.Errorf("producers per shard %v (%d producers): want shard 1 published by its relay before and after the kill, shards 0 and 2 by theirs",
			shardsWithProducers, len(byProducer))
	}
	t.Logf("%d rows committed, %d records, %d duplicates (shard 1's replay), producers per shard %v", len(w.Committed()), len(recs), dups, shardsWithProducers)
}

// PostgreSQL sends a logical message to every slot whatever the publications' row filters, so
// of two shard relays only shard 0's publishes it: each message reaches Kafka once, and both
// slots are confirmed past the messages (shard 1 passed over them, it did not stall on them).
func TestShardsPublishEachLogicalMessageOnceThroughShardZero(t *testing.T) {
	t.Parallel()
	f, bin, env := newShards(t, true, 2)
	cons := testenv.Consume(t, f.Topic)
	prefix := f.Name // every slot of the database receives every message: a prefix of this test's own
	for i := range 2 {
		testenv.Start(t, bin, env, "run", "--dlq-topic", f.DLQ, "--status-interval", "200ms", "--message-prefix", prefix, "--shard", fmt.Sprintf("%d/2", i))
	}
	ctx := context.Background()
	const messages = 20
	for i := range messages {
		content := fmt.Sprintf(`{"id": "msg-%d", "key": "m%d", "topic": %q, "payload": {"n": %d}}`, i, i%7, f.Topic, i)
		if _, err := f.Pool.Exec(ctx, `SELECT pg_logical_emit_message(true, $1, $2::text)`, prefix, content); err != nil {
			t.Fatal(err)
		}
	}
	// Rows of both shards after the messages: once every row is on the topic and both slots
	// are confirmed past them, both relays have read the messages.
	w := testenv.NewWriter(f.Pool, f.Table, f.Topic)
	for range 20 {
		if err := w.Tx(ctx, 2, 40); err != nil {
			t.Fatal(err)
		}
	}
	written := f.CurrentWAL(t)
	cons.WaitFor(t, 90*time.Second, "every row and every message", func(recs []*kgo.Record) bool {
		got := ids(recs)
		for i := range messages {
			if got[fmt.Sprintf("msg-%d", i)] == 0 {
				return false
			}
		}
		return testenv.HasAll(w.Committed())(recs)
	})
	for _, sh := range slotstore.AllShards(2) {
		testenv.Eventually(t, 60*time.Second, sh.Slot(f.Slot)+" confirmed past the messages and rows", func() bool {
			var ok bool
			err := f.Pool.QueryRow(ctx, `SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, sh.Slot(f.Slot), written.String()).Scan(&ok)
			return err == nil && ok
		})
	}
	recs := cons.WaitFor(t, 60*time.Second, "every record on the topic", func(recs []*kgo.Record) bool {
		return int64(len(recs)) >= testenv.EndOffset(t, f.Topic)
	})
	got := ids(recs)
	for i := range messages {
		if n := got[fmt.Sprintf("msg-%d", i)]; n != 1 {
			t.Errorf("message msg-%d published %d times, want once (by shard 0 only)", i, n)
		}
	}
}

// slot create --shards refuses a server without row filters (PostgreSQL 14) with exit code 2
// and says what it needs, and creates nothing.
func TestSlotCreateShardsRefusesPostgreSQL14(t *testing.T) {
	t.Parallel()
	bin := testenv.Binary(t, false)
	s := testenv.StartPGServer(t, testenv.PGBin(t, 14), "cdc-relay-shards14", "data", "wal_level = logical")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, testenv.OutboxDDL("public.outbox")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := testenv.Run(t, 60*time.Second, bin, nil, "slot", "create", "--pg-url", s.URL("postgres"),
		"--slot", "cdc_relay", "--publication", "cdc_relay_pub", "--shards", "2")
	if code != 2 || !strings.Contains(errOut, "row filters need PostgreSQL 15 or later") || !strings.Contains(errOut, "PostgreSQL 14") {
		t.Fatalf("slot create --shards 2 on 14: exit %d\n%s%s\nwant exit 2 saying row filters need 15+", code, out, errOut)
	}
	var slots, pubs int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots), (SELECT count(*) FROM pg_publication)`).Scan(&slots, &pubs); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 {
		t.Errorf("%d slots and %d publications exist after the refusal, want none", slots, pubs)
	}
}

// The slot commands on shards: create --shards 2 is idempotent, status lists both shard slots
// (one JSON document each) and the plain slot, run --shard refuses a shard publication made
// without the shard's row filter (exit 2), and drop --shards 2 removes the shards' slots and
// publications, leaving the plain slot.
func TestSlotCLIShards(t *testing.T) {
	t.Parallel()
	f, bin, env := newShards(t, false, 2)
	out, errOut, code := testenv.Run(t, 60*time.Second, bin, env, "slot", "create", "--table", f.Table, "--shards", "2")
	if code != 0 || strings.Count(out, "already exists") != 4 {
		t.Fatalf("slot create --shards 2 again: exit %d, want every publication and slot found:\n%s%s", code, out, errOut)
	}
	if out, errOut, code := testenv.Run(t, 60*time.Second, bin, env, "slot", "create", "--table", f.Table); code != 0 {
		t.Fatalf("slot create (the plain slot): exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = testenv.Run(t, 30*time.Second, bin, env, "slot", "status", "--json")
	if code != 0 {
		t.Fatalf("slot status --json: exit %d\n%s%s", code, out, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var listed []string
	for {
		var st struct {
			Slot string `json:"slot"`
		}
		if err := dec.Decode(&st); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("slot status --json: %v\n%s", err, out)
		}
		listed = append(listed, st.Slot)
	}
	want := []string{f.Slot, f.Slot + "_s0of2", f.Slot + "_s1of2"}
	if !slices.Equal(listed, want) {
		t.Fatalf("slot status --json lists %v, want %v", listed, want)
	}

	// A shard publication without the shard's filter: run --shard refuses to stream it.
	sh := slotstore.Shard{Index: 1, Count: 2}
	ctx := context.Background()
	for _, q := range []string{`DROP PUBLICATION ` + pgx.Identifier{sh.Publication(f.Publication)}.Sanitize(),
		`CREATE PUBLICATION ` + pgx.Identifier{sh.Publication(f.Publication)}.Sanitize() + ` FOR TABLE ` + f.Table + ` WITH (publish = 'insert')`} {
		if _, err := f.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = testenv.Run(t, 60*time.Second, bin, env, "run", "--shard", "1/2", "--dlq-topic", f.DLQ)
	if code != 2 || !strings.Contains(errOut, "is not the shard's") || !strings.Contains(errOut, "no row filter") {
		t.Fatalf("run --shard 1/2 over an unfiltered publication: exit %d, want 2 saying it lacks the shard's filter:\n%s%s", code, out, errOut)
	}

	out, errOut, code = testenv.Run(t, 60*time.Second, bin, env, "slot", "drop", "--shards", "2")
	if code != 0 {
		t.Fatalf("slot drop --shards 2: exit %d\n%s%s", code, out, errOut)
	}
	var slots, pubs int
	if err := f.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1 || '%'),
		(SELECT count(*) FROM pg_publication WHERE pubname LIKE $2 || '%')`, f.Slot, f.Publication).Scan(&slots, &pubs); err != nil {
		t.Fatal(err)
	}
	if slots != 1 || pubs != 1 {
		t.Errorf("after slot drop --shards 2: %d slots and %d publications of the base, want the plain ones only\n%s", slots, pubs, out)
	}
}
