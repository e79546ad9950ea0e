package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Table-less events: pg_logical_emit_message(true, prefix, content) inside a transaction is
// published like an outbox row, under the same invariant. A kill -9 after Kafka acknowledged
// some and before their position was confirmed loses nothing across the restart, duplicates only
// transactions in the replay window (at or after the confirmed position), and a rolled-back
// message is never published.
func TestLogicalMessagesSurviveARestartWithoutLoss(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	// A prefix of its own: every slot in the database receives every logical message, and
	// tests running in parallel must not publish each other's. (Their relays still see these
	// transactions, as empty ones; keep them few.)
	prefix := e.F.Name
	ctx := context.Background()
	var want []string
	for i := 0; i < 60; i++ {
		tx := e.F.Begin(t)
		for j := 0; j < 3; j++ {
			id := fmt.Sprintf("msg-%d-%d", i, j)
			content, _ := json.Marshal(map[string]any{
				"id": id, "key": fmt.Sprintf("agg-%d", (i+j)%5), "topic": e.F.Topic, "event_type": "order.shipped",
				"headers": map[string]string{"correlation-id": fmt.Sprintf("c-%d", i)}, "payload": map[string]any{"tx": i, "j": j},
			})
			if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, $1, $2::text)`, prefix, string(content)); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Rolled back: never published.
	tx := e.F.Begin(t)
	if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, $1, $2::text)`, prefix,
		fmt.Sprintf(`{"id": "rolled-back", "key": "agg-0", "topic": %q, "payload": {}}`, e.F.Topic)); err != nil {
		t.Fatal(err)
	}
	tx.Rollback(ctx)
	written := e.F.CurrentWAL(t)

	// kill -9 between Kafka's acknowledgement of a batch and its confirmation (the test hook),
	// so the restart must replay what Kafka already holds.
	cons := testenv.Consume(t, e.F.Topic)
	p := e.Start(t, []string{"CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=3"}, "--status-interval", "1h", "--message-prefix", prefix)
	p.WaitKilled(t, 60*time.Second)
	confirmed := e.F.SlotConfirmed(t)
	if confirmed >= e.F.CurrentWAL(t) {
		t.Fatalf("the slot confirmed %s, everything: the kill came too late to test a replay", confirmed)
	}
	e.Start(t, nil, "--message-prefix", prefix)
	recs := e.Settle(t, cons, written)
	got := ids(recs)
	for _, id := range want {
		if got[id] == 0 {
			t.Errorf("message %s lost", id)
		}
	}
	dups := 0
	for _, r := range recs {
		id := testenv.Header(r, "outbox-id")
		if id == "rolled-back" {
			t.Error("a message of a rolled-back transaction was published")
		}
		if got[id] > 1 {
			dups++
			if lsn := lsnOf(t, r); lsn < confirmed {
				t.Errorf("message %s (commit %s) duplicated although the slot had confirmed %s before the crash", id, lsn, confirmed)
			}
		}
		if testenv.Header(r, "event-type") != "order.shipped" || testenv.Header(r, "correlation-id") == "" || string(r.Key) == "" {
			t.Errorf("message %s: key %q event-type %q correlation-id %q", id, r.Key, testenv.Header(r, "event-type"), testenv.Header(r, "correlation-id"))
		}
		var v map[string]int
		if err := json.Unmarshal(r.Value, &v); err != nil || fmt.Sprintf("msg-%d-%d", v["tx"], v["j"]) != id {
			t.Errorf("message %s: value %s is not its payload", id, r.Value)
		}
	}
	if dups == 0 {
		t.Errorf("no duplicates: the kill did not fall between Kafka's acknowledgement and the confirmation")
	}
	t.Logf("%d messages, %d records, %d duplicate records, slot confirmed %s at the crash", len(want), len(recs), dups, confirmed)
}

// A non-transactional outbox message (pg_logical_emit_message(false, ...)) belongs to no
// committed transaction and is never published. It used to be counted and logged only, its
// content kept nowhere; it is dead-lettered now, as a bad row with its reason, and the slot
// confirms past it once it is parked.
func TestNonTransactionalMessageIsDeadLetteredNotDropped(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	prefix := e.F.Name // logical messages reach every slot (DESIGN.md, "Logical messages")
	ctx := context.Background()
	dlq := testenv.Consume(t, e.F.DLQ)
	p := e.Start(t, nil, "--message-prefix", prefix)
	content := fmt.Sprintf(`{"id": "nt-1", "key": "agg-1", "topic": %q, "payload": {"n": 1}}`, e.F.Topic)
	var lsnText string
	if err := e.F.Pool.QueryRow(ctx, `SELECT pg_logical_emit_message(false, $1, $2::text)::text`, prefix, content).Scan(&lsnText); err != nil {
		t.Fatal(err)
	}
	msgLSN, err := pglogrepl.ParseLSN(lsnText)
	if err != nil {
		t.Fatal(err)
	}
	recs := dlq.WaitFor(t, 60*time.Second, "the non-transactional message on the dead-letter topic", func(r []*kgo.Record) bool { return len(r) >= 1 })
	l := recs[0]
	if testenv.Header(l, "outbox-id") != "nt-1" || testenv.Header(l, "dlq-class") != "bad-row" || string(l.Key) != "agg-1" ||
		string(l.Value) != `{"n": 1}` || !strings.Contains(testenv.Header(l, "dlq-error"), "non-transactionally") ||
		testenv.Header(l, "dlq-original-topic") != e.F.Topic || testenv.Header(l, "outbox-table") != "message:"+prefix {
		t.Errorf("dead letter: key %q value %q headers %v", l.Key, l.Value, l.Headers)
	}
	testenv.Eventually(t, 60*time.Second, "the slot to confirm past the message", func() bool { return e.F.SlotConfirmed(t) >= msgLSN })
	if code := p.Stop(t); code != 0 {
		t.Fatalf("relay exit %d:\n%s", code, p.Output())
	}
	if n := testenv.EndOffset(t, e.F.Topic); n != 0 {
		t.Errorf("%d records on %s: a non-transactional message was published", n, e.F.Topic)
	}
	if !strings.Contains(p.Output(), "dead_lettered=1") {
		t.Errorf("the relay's final line does not count the dead letter:\n%s", p.Output())
	}
}
