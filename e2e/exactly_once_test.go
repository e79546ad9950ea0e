package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// eosEnv is a test's relay in exactly-once mode, with a checkpoint topic of its own.
type eosEnv struct {
	*testenv.RelayEnv
	checkpoints string
}

func newEOSEnv(t *testing.T) *eosEnv {
	t.Helper()
	e := &eosEnv{RelayEnv: testenv.NewRelayEnv(t, true)}
	e.checkpoints = e.F.Name + ".checkpoints"
	testenv.CreateTopicWithConfig(t, e.checkpoints, 1, kafkatxn.CheckpointTopicConfigs)
	return e
}

// start runs `cdc-relay run --delivery exactly-once` with the test's checkpoint topic.
func (e *eosEnv) start(t *testing.T, env []string, args ...string) *testenv.Proc {
	t.Helper()
	return e.Start(t, env, append([]string{"--delivery", "exactly-once", "--checkpoint-topic", e.checkpoints}, args...)...)
}

// startReady is start that returns once the relay has read its checkpoint (it holds the slot
// and the transactional id).
func (e *eosEnv) startReady(t *testing.T, env []string, args ...string) *testenv.Proc {
	t.Helper()
	p := e.start(t, env, args...)
	testenv.Eventually(t, 60*time.Second, "the relay to read the checkpoint", func() bool { return strings.Contains(p.Output(), "read the checkpoint") })
	return p
}

// heldLetter returns a row whose letter is held: its topic refuses it (too large), and so do
// the dead-letter topic and, until accept is called, the dead-letter table. A Kafka
// transaction that holds the row cannot commit meanwhile.
func (e *eosEnv) heldLetter(t *testing.T) (held testenv.Row, accept func()) {
	t.Helper()
	small := e.F.LimitedTopic(t, "small", "2000")
	testenv.SetTopicConfig(t, e.F.DLQ, "max.message.bytes", "2000")
	accept = e.F.RefuseDeadLetters(t)
	return testenv.Row{Key: "held", Topic: small, Payload: `{"pad": "` + strings.Repeat("x", 5000) + `"}`}, accept
}

// checkpoint is the slot's newest committed checkpoint.
func (e *eosEnv) checkpoint(t *testing.T) kafkatxn.Checkpoint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cp, _, err := kafkatxn.ReadCheckpoint(ctx, []kgo.Opt{kgo.SeedBrokers(testenv.Brokers(t)...)}, e.checkpoints, e.F.Slot)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// readCommitted returns every record of topic a read_committed consumer sees, to the high
// watermark (waiting for the transactions open below it to end), in offset order per partition.
func readCommitted(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var recs []*kgo.Record
	if err := kafkatxn.ReadCommitted(ctx, []kgo.Opt{kgo.SeedBrokers(testenv.Brokers(t)...)}, topic, func(r *kgo.Record) { recs = append(recs, r) }); err != nil {
		t.Fatal(err)
	}
	return recs
}

// readCommittedConsumer reads topic as a read_committed consumer does.
func readCommittedConsumer(t *testing.T, topic string) *testenv.Consumer {
	return testenv.Consume(t, topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
}

// A relay in exactly-once mode killed with SIGKILL mid-stream, again and again, and restarted:
// a read_committed consumer sees each committed row once, in per-key order. Half the kills
// come from outside at any moment; the other half from the crash hook between a Kafka commit
// and its confirmation, the widest replay there is: there the slot must stand at or behind
// the newest committed checkpoint (only a committed checkpoint's position is confirmed).
func TestExactlyOnceKilledMidStreamPublishesEachRowOnce(t *testing.T) {
	t.Parallel()
	e := newEOSEnv(t)
	cons := readCommittedConsumer(t, e.F.Topic)
	w := testenv.NewWriter(e.F.Pool, e.F.Table, e.F.Topic).Start(t, cons, 5*time.Millisecond)
	const kills = 4
	for i := range kills {
		seen := len(cons.Records())
		if i%2 == 0 {
			p := e.start(t, nil)
			cons.WaitFor(t, 90*time.Second, "rows committed by this run", func(r []*kgo.Record) bool { return len(r) >= seen+30 })
			p.Kill(t, 30*time.Second)
			continue
		}
		before := e.F.SlotConfirmed(t)
		p := e.start(t, []string{"CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=3"})
		p.WaitKilled(t, 90*time.Second)
		confirmed, cp := e.F.SlotConfirmed(t), e.checkpoint(t)
		if confirmed > max(cp.Position, before) {
			t.Errorf("kill %d: the slot moved from %s to %s, past the newest committed checkpoint %s", i+1, before, confirmed, cp.Position)
		}
		if !strings.Contains(p.Output(), "read the checkpoint") {
			t.Errorf("kill %d: no start line saying what the checkpoint skips; output:\n%s", i+1, p.Output())
		}
	}
	p := e.start(t, nil)
	more := len(w.Committed()) + 50
	testenv.Eventually(t, 60*time.Second, "50 more rows committed", func() bool { return len(w.Committed()) >= more })
	w.Stop()
	cons.WaitFor(t, 90*time.Second, "every committed row", testenv.HasAll(w.Committed()))
	stopClean(t, p, "the last run")
	recs := readCommitted(t, e.F.Topic)
	if dups := w.Verify(t, recs); dups != 0 || len(ids(recs)) != len(recs) {
		t.Errorf("%d duplicate records of committed rows, %d records of %d ids, for a read_committed consumer after %d kills",
			dups, len(recs), len(ids(recs)), kills)
	}
	// A row whose commit the writer's stop interrupted is published but not in its ledger.
	t.Logf("%d rows, %d read_committed records of %d ids, %d kills", len(w.Committed()), len(recs), len(ids(recs)), kills)
}

// One PostgreSQL transaction of 5,000 rows is larger than a Kafka transaction of 1,000 records:
// the relay splits it, and the checkpoint counts its committed part. Killed right after the
// second commit (before PostgreSQL hears of it), the restart replays the whole transaction from
// the slot and skips exactly the 2,000 records Kafka committed: each row once, in key order.
func TestExactlyOnceSplitTransactionKilledBetweenCommitsReplaysOnlyTheRest(t *testing.T) {
	t.Parallel()
	// A long interval: the size bound alone splits, so the checkpoint's count is known.
	splitKilledBetweenCommits(t, 5000, []string{"--transaction-max-records", "1000", "--transaction-interval", "5s"},
		func(records int64) error {
			if records != 2000 {
				return errors.New("want the 2000 records of the first two Kafka transactions")
			}
			return nil
		})
}

// One PostgreSQL transaction of 50,000 rows, far fewer than a Kafka transaction holds
// (--transaction-max-records 1,000,000), takes the relay many times twice the interval of 10 ms
// to decode and produce: the Kafka transaction still inside it at twice the interval is
// committed there, a split by time. Killed right after the second commit, the restart replays
// the transaction and skips what the two committed, whatever their count: each row once, in
// key order. Without the time bound nothing splits it: the relay commits it whole, once, after
// its end, and confirms past it before the crash hook's second commit comes.
func TestExactlyOnceSplitByTimeKilledBetweenCommitsReplaysOnlyTheRest(t *testing.T) {
	t.Parallel()
	const n = 50_000
	splitKilledBetweenCommits(t, n, []string{"--transaction-max-records", "1000000", "--transaction-interval", "10ms"},
		func(records int64) error {
			if records <= 0 || records >= n {
				return fmt.Errorf("want part of the %d rows: two Kafka transactions of twice the interval each", n)
			}
			return nil
		})
}

// splitKilledBetweenCommits commits one PostgreSQL transaction of n rows over five keys, runs
// the relay with args and the crash hook after its second Kafka commit, and checks what that
// commit left: a checkpoint whose split is of that transaction, with a count of records that
// check accepts, and whose position is before it; a slot not past it. The restart (same args)
// must say it skips that count, confirm past the transaction, and leave a read_committed reader
// each row exactly once, in key order.
func splitKilledBetweenCommits(t *testing.T, n int, args []string, check func(records int64) error) {
	t.Helper()
	e := newEOSEnv(t)
	ids := insertSeries(t, e.F, n, 5)
	written := e.F.CurrentWAL(t)
	p := e.start(t, []string{"CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=2"}, args...)
	// A transaction nothing splits is committed whole and confirmed: then the hook never fires.
	testenv.Eventually(t, 120*time.Second, "the crash hook's kill, or the slot past the transaction", func() bool {
		return p.Exited() || e.F.SlotConfirmed(t) >= written
	})
	if !p.Exited() {
		p.Kill(t, 30*time.Second)
		t.Fatalf("the relay confirmed the transaction before its second Kafka commit: it was not split (checkpoint %+v)", e.checkpoint(t))
	}
	p.WaitKilled(t, 30*time.Second)
	cp := e.checkpoint(t)
	if err := check(cp.Split.Records); err != nil {
		t.Errorf("checkpoint %+v: %d records of the split transaction: %v", cp, cp.Split.Records, err)
	}
	if cp.Position >= cp.Split.LSN {
		t.Errorf("checkpoint %+v: the position is not before the split transaction", cp)
	}
	// Other tests' WAL before the transaction may be confirmed (idle keepalives), the
	// transaction may not: the replay would not send it.
	if confirmed := e.F.SlotConfirmed(t); confirmed > cp.Split.LSN {
		t.Errorf("the slot confirmed %s, past the split transaction's commit %s", confirmed, cp.Split.LSN)
	}
	t.Logf("%d rows; after the second Kafka commit: checkpoint %+v", n, cp)
	p = e.start(t, nil, args...)
	testenv.Eventually(t, 120*time.Second, "the slot to confirm past the transaction", func() bool { return e.F.SlotConfirmed(t) >= written })
	stopClean(t, p, "the restart")
	if skips := fmt.Sprintf("the first %d records of the transaction committing at %s", cp.Split.Records, cp.Split.LSN); !strings.Contains(p.Output(), skips) {
		t.Errorf("the restart's start line does not say it skips %q; output:\n%s", skips, p.Output())
	}
	recs := readCommitted(t, e.F.Topic)
	if len(recs) > 0 && lsnOf(t, recs[0]) != cp.Split.LSN {
		t.Errorf("the records are of the transaction committing at %s, the checkpoint's split of %s", lsnOf(t, recs[0]), cp.Split.LSN)
	}
	assertOnceInKeyOrder(t, recs, ids)
}

// insertSeries commits one transaction of n rows to f's table and topic, row i with key
// k<i mod keys> and payload {"i": i}, in one statement, and returns their ids in insert order.
func insertSeries(t *testing.T, f *testenv.Fixture, n, keys int) []int64 {
	t.Helper()
	rows, err := f.Pool.Query(context.Background(), `INSERT INTO `+f.Table+` (aggregate_id, topic, payload)
		SELECT 'k' || (g % $3::int), $1, jsonb_build_object('i', g) FROM generate_series(0, $2::int - 1) g RETURNING id`, f.Topic, n, keys)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("insert %d rows into %s: %v", n, f.Table, err)
	}
	return ids
}

// assertOnceInKeyOrder checks that recs hold each of ids exactly once and nothing else, and
// that per key the ids come in increasing order (ids grow in commit order per key).
func assertOnceInKeyOrder(t *testing.T, recs []*kgo.Record, ids []int64) {
	t.Helper()
	count := map[int64]int{}
	last := map[string]int64{}
	reordered := 0
	for _, r := range recs {
		var id int64
		if _, err := fmt.Sscan(testenv.Header(r, "outbox-id"), &id); err != nil {
			t.Fatalf("record without an outbox id: %v", err)
		}
		count[id]++
		if k := string(r.Key); id <= last[k] {
			if reordered++; reordered <= 5 {
				t.Errorf("key %s: outbox id %d after %d", k, id, last[k])
			}
		}
		last[string(r.Key)] = max(last[string(r.Key)], id)
	}
	lost, dups := 0, 0
	for _, id := range ids {
		switch c := count[id]; {
		case c == 0:
			lost++
		case c > 1:
			dups += c - 1
		}
	}
	if lost > 0 || dups > 0 || reordered > 0 || len(count) != len(ids) {
		t.Errorf("%d rows: %d lost, %d duplicate records, %d out of key order, %d distinct ids read", len(ids), lost, dups, reordered, len(count))
	}
}

// A relay paused (SIGSTOP) past wal_sender_timeout loses the slot to a standby, which takes the
// transactional id (fencing the paused one and aborting its open transaction), reads the
// checkpoint and publishes. The paused relay, resumed, publishes nothing a read_committed
// consumer sees, confirms nothing, and exits 1 saying another relay holds the transactional id.
// Relay A is paused with an open transaction that holds acknowledged records: a caught-up relay
// commits at once, so its commit waits for the dead letter of a row Kafka refuses (too large for
// its topic), which neither the dead-letter topic nor the table takes until A is paused.
func TestExactlyOnceZombieIsFencedAndPublishesNothing(t *testing.T) {
	e := newEOSEnv(t)
	letter, accept := e.heldLetter(t)
	a := e.start(t, nil, "--pg-url", walSenderURL(t, "", "5s"), "--transaction-interval", "5s", "--metrics-addr", "127.0.0.1:0")
	aMetrics := metricsAddr(t, a)
	testenv.Eventually(t, 60*time.Second, "relay A to take the transactional id", func() bool { return strings.Contains(a.Output(), "read the checkpoint") })
	b := e.start(t, nil, "--metrics-addr", "")
	testenv.Eventually(t, 60*time.Second, "relay B to wait as a standby", func() bool { return strings.Contains(b.Output(), "waiting as a standby") })

	cons := readCommittedConsumer(t, e.F.Topic)
	w := testenv.NewWriter(e.F.Pool, e.F.Table, e.F.Topic)
	write := func(txns int) {
		for range txns {
			if err := w.Tx(t.Context(), 2, 4); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(5)
	cons.WaitFor(t, 60*time.Second, "the rows A committed", testenv.HasAll(w.Committed()))
	metricAtLeast(t, aMetrics, "cdc_relay_kafka_transactions_committed_total", 1)
	write(5)
	held := e.F.Insert(t, false, testenv.Row{Key: "z", Payload: `{"n": 1}`},
		letter, testenv.Row{Key: "z", Payload: `{"n": 2}`})
	metricAtLeast(t, aMetrics, "cdc_relay_transactions_total", 11) // the last in A's open Kafka transaction
	testenv.Eventually(t, 60*time.Second, "relay A's commit to wait for the letter the table refuses", func() bool {
		return a.Exited() || strings.Contains(a.Output(), "cannot park dead letters in PostgreSQL")
	})
	a.Pause(t)
	accept()
	testenv.Eventually(t, 60*time.Second, "relay B to take the slot and the transactional id", func() bool { return strings.Contains(b.Output(), "read the checkpoint") })
	write(10)
	cons.WaitFor(t, 60*time.Second, "every committed row, A's open transaction's published by B", testenv.HasAll(append(slices.Clone(w.Committed()), held[0], held[2])))

	a.Continue()
	if code, _ := a.Wait(t, 60*time.Second); code != 1 {
		t.Errorf("relay A exited %d, want 1", code)
	}
	if out := a.Output(); !strings.Contains(out, "another relay holds this slot's transactional id") {
		t.Errorf("relay A's exit does not say it was fenced; output:\n%s", out)
	}
	write(5)
	cons.WaitFor(t, 60*time.Second, "B's rows after A's exit", testenv.HasAll(w.Committed()))
	if code := b.Stop(t); code != 0 {
		t.Fatalf("relay B exited %d; output:\n%s", code, b.Output())
	}
	recs := readCommitted(t, e.F.Topic)
	if dups := w.Verify(t, recs); dups != 0 || len(ids(recs)) != len(recs) {
		t.Errorf("%d duplicate records, %d records of %d ids, for a read_committed consumer: the fenced relay published", dups, len(recs), len(ids(recs)))
	}
}

// Records Kafka acknowledged in a Kafka transaction that is still open are not confirmed to
// PostgreSQL, neither by their acknowledgement nor by the heartbeats that come meanwhile (each
// asks for a status): a kill -9 aborts the transaction, and the restart must find them in the
// slot's replay. A read_uncommitted consumer sees them at once; a read_committed one only after
// the commit. A relay caught up commits at once, so the transaction is held open by a third
// row that Kafka refuses (too large for its topic) and whose dead letter neither the
// dead-letter topic nor the table takes: the commit waits for it (E8) with the two rows
// acknowledged, over a --transaction-interval of 10 s.
func TestExactlyOnceOpenTransactionHoldsTheSlot(t *testing.T) {
	t.Parallel()
	e := newEOSEnv(t)
	held, accept := e.heldLetter(t)
	p := e.startReady(t, nil, "--transaction-interval", "10s")
	uncommitted, committed := testenv.Consume(t, e.F.Topic), readCommittedConsumer(t, e.F.Topic)
	inserted := e.F.Insert(t, false, testenv.Row{Key: "a", Payload: `{"n": 1}`}, testenv.Row{Key: "b", Payload: `{"n": 2}`}, held)
	ids := inserted[:2]
	recs := uncommitted.WaitFor(t, 30*time.Second, "the records, acknowledged in the open transaction", testenv.HasAll(ids))
	commit := lsnOf(t, recs[0])
	testenv.Eventually(t, 60*time.Second, "the table to refuse the letter", func() bool {
		return p.Exited() || strings.Contains(p.Output(), "cannot park dead letters in PostgreSQL")
	})
	if p.Exited() {
		t.Fatalf("the relay exited; output:\n%s", p.Output())
	}
	// Three heartbeats (--status-interval 1s) and the acknowledgement's confirm delay, many
	// times over.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c := e.F.SlotConfirmed(t); c > commit {
			t.Fatalf("the slot confirmed %s, past the open transaction's records (commit %s)", c, commit)
		}
	}
	if n := len(committed.Records()); n != 0 {
		t.Errorf("a read_committed consumer saw %d records of the open transaction", n)
	}
	p.Kill(t, 30*time.Second)
	accept()
	p = e.start(t, nil)
	committed.WaitFor(t, 60*time.Second, "the rows, replayed and committed", testenv.HasAll(ids))
	stopClean(t, p, "the restart")
	assertOnceInKeyOrder(t, readCommitted(t, e.F.Topic), ids)
}

// A relay on a quiet stream commits each Kafka transaction as soon as it has decoded it, not
// when --transaction-interval ends: with an interval of 10 s, a read_committed consumer sees
// each row of three transactions, written one at a time, within 5 s (about the commit's round
// trip on an idle machine). A relay that held each Kafka transaction open for the interval made
// the consumer wait the whole 10 s for a row alone.
func TestExactlyOnceQuietStreamIsCommittedWithoutWaitingForTheInterval(t *testing.T) {
	t.Parallel()
	e := newEOSEnv(t)
	p := e.startReady(t, nil, "--transaction-interval", "10s")
	cons := readCommittedConsumer(t, e.F.Topic)
	var ids []int64
	for i := range 3 {
		ids = append(ids, e.F.Insert(t, false, testenv.Row{Key: "a", Payload: fmt.Sprintf(`{"n": %d}`, i)})...)
		began := time.Now()
		cons.WaitFor(t, 5*time.Second, fmt.Sprintf("row %d committed in Kafka well before the 10 s interval", i+1), testenv.HasAll(ids))
		t.Logf("row %d: visible to a read_committed consumer %s after its commit in PostgreSQL", i+1, time.Since(began).Round(time.Millisecond))
	}
	stopClean(t, p, "the relay")
	assertOnceInKeyOrder(t, readCommitted(t, e.F.Topic), ids)
}

// A bad row's dead letter goes to the dead-letter topic inside the Kafka transaction of its
// PostgreSQL transaction, and the commit waits for it (Kafka commits whatever the transaction
// holds: committed without it, the letter would be lost to a crash). Killed right after that
// commit, before PostgreSQL hears of it, the restart skips the whole transaction: a
// read_committed consumer sees the two rows and the one letter once each.
func TestExactlyOnceDeadLetterIsInTheTransaction(t *testing.T) {
	t.Parallel()
	e := newEOSEnv(t)
	ids := e.F.Insert(t, false, testenv.Row{Key: "a", Payload: `{"n": 1}`}, testenv.Row{Key: "", Payload: `{"n": 2}`},
		testenv.Row{Key: "a", Payload: `{"n": 3}`})
	written := e.F.CurrentWAL(t)
	p := e.start(t, []string{"CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=1"})
	p.WaitKilled(t, 60*time.Second)
	p = e.start(t, nil)
	testenv.Eventually(t, 60*time.Second, "the slot to confirm past the transaction", func() bool { return e.F.SlotConfirmed(t) >= written })
	stopClean(t, p, "the restart")
	assertOnceInKeyOrder(t, readCommitted(t, e.F.Topic), []int64{ids[0], ids[2]})
	letters := readCommitted(t, e.F.DLQ)
	if len(letters) != 1 || testenv.Header(letters[0], "outbox-id") != fmt.Sprint(ids[1]) {
		t.Errorf("%d read_committed dead letters: want one, the bad row's (outbox id %d)", len(letters), ids[1])
	}
}

// A record Kafka refuses (too large for its topic) is replaced by its dead letter, and the
// Kafka transaction that holds its neighbours commits only once that letter is acknowledged or,
// when the dead-letter topic refuses it too, committed in the dead-letter table (rule 16): Kafka
// commits whatever the transaction holds, so a commit before the letter lands would skip the
// record for good on the next replay. Here the table refuses the letter for a while: no
// read_committed consumer sees the transaction's other rows meanwhile, over many transaction
// intervals. A kill -9 while the letter is held, and a restart once the table takes it, park
// the letter once and publish each row once.
func TestExactlyOnceCommitWaitsForTheDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEOSEnv(t)
	held, accept := e.heldLetter(t)
	p := e.startReady(t, nil)
	cons := readCommittedConsumer(t, e.F.Topic)

	ids := e.F.Insert(t, false, testenv.Row{Key: "a", Payload: `{"n": 1}`},
		held,
		testenv.Row{Key: "a", Payload: `{"n": 3}`})
	later := e.F.Insert(t, false, testenv.Row{Key: "a", Payload: `{"n": 4}`})
	const refused = "cannot park dead letters in PostgreSQL"
	testenv.Eventually(t, 60*time.Second, "the table to refuse the letter", func() bool { return p.Exited() || strings.Contains(p.Output(), refused) })
	if p.Exited() {
		t.Fatalf("the relay exited; output:\n%s", p.Output())
	}
	// Twenty transaction intervals (100 ms): a commit that did not wait for the letter is due
	// within the first.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if recs := cons.Records(); len(recs) > 0 {
			t.Errorf("a read_committed consumer saw %d records (outbox id %s first) while the dead letter of outbox id %d was held: "+
				"the Kafka transaction committed without it", len(recs), testenv.Header(recs[0], "outbox-id"), ids[1])
			break
		}
	}
	p.Kill(t, 30*time.Second)
	accept()
	p = e.start(t, nil)
	want := []int64{ids[0], ids[2], later[0]}
	cons.WaitFor(t, 90*time.Second, "the rows, replayed and committed", testenv.HasAll(want))
	var letters int
	var outboxID string
	parked := func() bool {
		err := e.F.Pool.QueryRow(t.Context(), `SELECT count(*), coalesce(min(outbox_id), '') FROM public.cdc_relay_dead_letters WHERE slot = $1`,
			e.F.Slot).Scan(&letters, &outboxID)
		if err != nil {
			t.Fatal(err)
		}
		return letters > 0
	}
	testenv.Eventually(t, 60*time.Second, "the letter in the dead-letter table", parked)
	stopClean(t, p, "the restart")
	if parked(); letters != 1 || outboxID != fmt.Sprint(ids[1]) {
		t.Errorf("%d dead letters in the table (outbox id %s first): want one, of outbox id %d", letters, outboxID, ids[1])
	}
	assertOnceInKeyOrder(t, readCommitted(t, e.F.Topic), want)
}
