package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Every committed row arrives once, with the contract's key, value and headers; rows of
// rolled-back transactions never arrive; per key, records arrive in commit order.
func TestDeliversEveryCommittedRowInCommitOrderPerKey(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	e.Start(t, nil)
	cons := testenv.Consume(t, e.F.Topic)

	var committed []int64
	var rolledBack []int64
	txOf := map[int64]int{} // id -> transaction number
	tx := 0
	for i := 0; i < 30; i++ {
		tx++
		for _, id := range e.F.Insert(t, false, testenv.Row{Key: fmt.Sprintf("k%d", i%5), Payload: fmt.Sprintf(`{"i": %d}`, i)}) {
			committed = append(committed, id)
			txOf[id] = tx
		}
		if i%6 == 0 {
			rolledBack = append(rolledBack, e.F.Insert(t, true,
				testenv.Row{Key: "k1", Payload: `{"rolled": "back"}`},
				testenv.Row{Key: "k2", Payload: `{"rolled": "back"}`})...)
		}
	}
	for i := 0; i < 10; i++ {
		tx++
		var rows []testenv.Row
		for j := 0; j < 5; j++ {
			rows = append(rows, testenv.Row{Key: fmt.Sprintf("k%d", (i+j)%2), Payload: fmt.Sprintf(`{"tx": %d, "j": %d}`, i, j), EventType: "order.updated"})
		}
		for _, id := range e.F.Insert(t, false, rows...) {
			committed = append(committed, id)
			txOf[id] = tx
		}
	}
	tx++
	special := e.F.Insert(t, false, testenv.Row{Key: "k1", Payload: `{"special": true}`, EventType: "order.created",
		Headers: `{"correlation-id": "c-1", "traceparent": "00-abc-def-01", "attempt": 3}`})
	committed = append(committed, special...)
	txOf[special[0]] = tx

	recs := cons.WaitFor(t, 60*time.Second, "every committed row", hasAll(committed))

	assertCleanDelivery(t, recs, committed, rolledBack)

	// Contract fields, against the table.
	lsnOfTx := map[int]string{}
	order := newKeyOrder()
	for _, r := range recs {
		id, _ := strconv.ParseInt(testenv.Header(r, "outbox-id"), 10, 64)
		var key, payload string
		var eventType, headers *string
		if err := e.F.Pool.QueryRow(t.Context(), `SELECT aggregate_id, payload::text, event_type, headers::text FROM `+e.F.Table+` WHERE id = $1`, id).
			Scan(&key, &payload, &eventType, &headers); err != nil {
			t.Fatalf("row %d: %v", id, err)
		}
		if string(r.Key) != key || testenv.Header(r, "aggregate-id") != key {
			t.Errorf("row %d: key %q, aggregate-id header %q, want %q", id, r.Key, testenv.Header(r, "aggregate-id"), key)
		}
		if !jsonEqual(t, r.Value, []byte(payload)) {
			t.Errorf("row %d: value %s, want %s", id, r.Value, payload)
		}
		if want := deref(eventType); testenv.Header(r, "event-type") != want {
			t.Errorf("row %d: event-type %q, want %q", id, testenv.Header(r, "event-type"), want)
		}
		if r.Topic != e.F.Topic {
			t.Errorf("row %d: topic %q", id, r.Topic)
		}
		ct, err := time.Parse(time.RFC3339Nano, testenv.Header(r, "cdc-commit-time"))
		if err != nil || time.Since(ct) > 5*time.Minute || time.Since(ct) < -time.Minute {
			t.Errorf("row %d: cdc-commit-time %q: %v", id, testenv.Header(r, "cdc-commit-time"), err)
		}
		lsn := lsnOf(t, r).String()
		if prev, ok := lsnOfTx[txOf[id]]; ok && prev != lsn {
			t.Errorf("rows of one transaction carry different cdc-lsn: %s and %s", prev, lsn)
		}
		lsnOfTx[txOf[id]] = lsn
		order.check(t, key, id, r) // per key: one partition, ids in commit order
	}
	// The row's own headers become Kafka headers; non-string values keep their JSON text.
	for _, r := range recs {
		if testenv.Header(r, "outbox-id") != strconv.FormatInt(special[0], 10) {
			continue
		}
		for k, want := range map[string]string{"correlation-id": "c-1", "traceparent": "00-abc-def-01", "attempt": "3", "event-type": "order.created"} {
			if got := testenv.Header(r, k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
	}
	// Commit LSNs grow with the transactions.
	for i := 2; i <= tx; i++ {
		a, b := lsnOfTx[i-1], lsnOfTx[i]
		if a != "" && b != "" && lsnLess(t, b, a) {
			t.Errorf("transaction %d has cdc-lsn %s before transaction %d's %s", i, b, i-1, a)
		}
	}
}

// A service may insert its outbox row and delete it in the same transaction, so the table
// never holds published rows: the WAL still carries the INSERT, and the relay publishes it
// (the publication is insert-only, so the DELETE is not published).
func TestInsertAndDeleteInOneTransactionIsPublished(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	e.Start(t, nil)
	cons := testenv.Consume(t, e.F.Topic)
	ctx := context.Background()
	var ids []int64
	for i := 0; i < 5; i++ {
		tx := e.F.Begin(t)
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO `+e.F.Table+` (aggregate_id, topic, payload, event_type) VALUES ($1, $2, $3, 'order.created') RETURNING id`,
			fmt.Sprintf("order-%d", i), e.F.Topic, fmt.Sprintf(`{"order": %d}`, i)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+e.F.Table+` WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	recs := cons.WaitFor(t, 60*time.Second, "the deleted rows' records", hasAll(ids))
	var n int
	if err := e.F.Pool.QueryRow(ctx, `SELECT count(*) FROM `+e.F.Table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d rows in the outbox, want 0", n)
	}
	for _, r := range recs {
		id, _ := strconv.ParseInt(testenv.Header(r, "outbox-id"), 10, 64)
		if want := fmt.Sprintf(`{"order": %d}`, id-ids[0]); string(r.Value) != want || testenv.Header(r, "event-type") != "order.created" {
			t.Errorf("record %d: value %s event-type %q, want %s and order.created", id, r.Value, testenv.Header(r, "event-type"), want)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Errorf("value %q is not JSON: %v", a, err)
		return false
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
