package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/inbox"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// headerCount returns how many headers of r are named key.
func headerCount(r *kgo.Record, key string) int {
	n := 0
	for _, h := range r.Headers {
		if h.Key == key {
			n++
		}
	}
	return n
}

// Outbox ids are unique per table only. Two outbox tables in two schemas,
// one publication over both, each writes its id 1: both records arrive, told apart by their
// outbox-table header, and an inbox on the real PostgreSQL processes both, once each.
func TestContractOutboxTableTellsTwoTablesApart(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t)
	ctx := context.Background()
	schemaA, schemaB := "a_"+f.Name, "b_"+f.Name
	tableA, tableB := schemaA+".outbox", schemaB+".outbox"
	for _, s := range []string{schemaA, schemaB} {
		if _, err := f.Pool.Exec(ctx, `CREATE SCHEMA `+s); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Pool.Exec(ctx, testenv.OutboxDDL(s+".outbox")); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = f.Pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+schemaA+`, `+schemaB+` CASCADE`)
	})
	e := testenv.RelayEnvOf(t, f, true)
	e.CreateSlot(t, tableA+","+tableB)
	p := e.Start(t, nil)
	cons := testenv.Consume(t, f.Topic)

	for _, table := range []string{tableA, tableB} {
		var id int64
		if err := f.Pool.QueryRow(ctx, `INSERT INTO `+table+` (aggregate_id, topic, payload) VALUES ('order-1', $1, '{"n": 1}') RETURNING id`, f.Topic).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if id != 1 {
			t.Fatalf("%s: id %d, want 1 (the collision under test)", table, id)
		}
	}
	recs := cons.WaitFor(t, 60*time.Second, "both tables' id 1", func(r []*kgo.Record) bool { return len(r) >= 2 })
	tables := map[string]bool{}
	for _, r := range recs {
		if id := testenv.Header(r, "outbox-id"); id != "1" {
			t.Errorf("outbox-id %q, want 1", id)
		}
		if n := headerCount(r, "outbox-table"); n != 1 {
			t.Errorf("%d outbox-table headers, want 1: %v", n, r.Headers)
		}
		if r.Headers[1].Key != "outbox-table" {
			t.Errorf("header 1 is %q, want outbox-table right after outbox-id", r.Headers[1].Key)
		}
		tables[testenv.Header(r, "outbox-table")] = true
	}
	if len(recs) != 2 || !tables[tableA] || !tables[tableB] {
		t.Fatalf("records from %v, want one from %s and one from %s (%d records)", tables, tableA, tableB, len(recs))
	}

	// The consumer's inbox processes both, and absorbs a redelivery of both.
	effects := f.Name + "_effects"
	if _, err := f.Pool.Exec(ctx, `CREATE TABLE `+effects+` (outbox_table text, outbox_id text)`); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(inbox.Config{Consumer: "billing", Table: f.Name + "_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+effects+`, `+f.Name+`_inbox`)
	})
	if err := in.CreateTable(ctx, f.Pool); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, r := range append(recs, recs...) {
		ok, err := in.Handle(ctx, f.Pool, r, func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+effects+` VALUES ($1, $2)`, inbox.OutboxTable(r), inbox.OutboxID(r))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			ran++
		}
	}
	var n int
	if err := f.Pool.QueryRow(ctx, `SELECT count(DISTINCT outbox_table) FROM `+effects).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if ran != 2 || n != 2 {
		t.Errorf("the inbox ran %d handlers for 4 deliveries of 2 events (%d distinct tables), want 2 and 2", ran, n)
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
}

// A row's own headers never shadow the contract's: a row whose headers
// use outbox-id or cdc-lsn (and a logical message whose headers use outbox-table) is a bad
// row, parked on the dead-letter topic with the reason, carrying each contract header once;
// the valid rows around them are delivered normally and the slot moves past all of them.
func TestContractReservedRowHeadersAreDeadLettered(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	// A message prefix of its own, so that the other tests' relays ignore this test's message.
	prefix := e.F.Name
	p := e.Start(t, nil, "--message-prefix", prefix)
	cons := testenv.Consume(t, e.F.Topic)
	dlq := testenv.Consume(t, e.F.DLQ)
	ctx := context.Background()

	row := func(key, headers string) int64 {
		return e.F.Insert(t, false, testenv.Row{Key: key, Payload: `{"n": 1}`, Headers: headers})[0]
	}
	good := []int64{row("k1", `{"correlation-id": "c-1"}`)}
	badID := row("k1", `{"outbox-id": "1", "correlation-id": "c-2"}`)
	good = append(good, row("k1", ""))
	badLSN := row("k2", `{"cdc-lsn": "0/1"}`)
	content := fmt.Sprintf(`{"id": "msg-1", "key": "k3", "topic": %q, "headers": {"outbox-table": "public.other"}, "payload": {}}`, e.F.Topic)
	if _, err := e.F.Pool.Exec(ctx, `SELECT pg_logical_emit_message(true, $1, $2::text)`, prefix, content); err != nil {
		t.Fatal(err)
	}
	good = append(good, row("k2", `{"traceparent": "00-1"}`))
	end := e.F.CurrentWAL(t)

	bads := map[string]string{
		strconv.FormatInt(badID, 10):  `column "headers": headers: "outbox-id" is reserved by the record contract`,
		strconv.FormatInt(badLSN, 10): `column "headers": headers: "cdc-lsn" is reserved by the record contract`,
		"msg-1":                       `column "headers": headers: "outbox-table" is reserved by the record contract`,
	}
	dead := dlq.WaitFor(t, 60*time.Second, "the bad rows on the dead-letter topic", func(r []*kgo.Record) bool { return len(r) >= len(bads) })
	for _, r := range dead {
		id := testenv.Header(r, "outbox-id")
		reason, ok := bads[id]
		if !ok {
			t.Errorf("unexpected dead letter %s: %v", id, r.Headers)
			continue
		}
		delete(bads, id)
		if got := testenv.Header(r, "dlq-error"); !strings.Contains(got, reason) || !strings.Contains(got, "bad row") {
			t.Errorf("%s: dlq-error %q, want it to contain %q", id, got, reason)
		}
		for _, k := range []string{"outbox-id", "outbox-table", "cdc-lsn", "dlq-error"} {
			if n := headerCount(r, k); n != 1 {
				t.Errorf("%s: %d %s headers in the dead letter, want 1: %v", id, n, k, r.Headers)
			}
		}
		if id == strconv.FormatInt(badID, 10) && testenv.Header(r, "correlation-id") != "c-2" {
			t.Errorf("the row's other headers were not kept in the dead letter: %v", r.Headers)
		}
		if id == strconv.FormatInt(badLSN, 10) && testenv.Header(r, "cdc-lsn") == "0/1" {
			t.Errorf("the dead letter carries the row's cdc-lsn: %v", r.Headers)
		}
	}
	if len(bads) != 0 {
		t.Errorf("not dead-lettered: %v", bads)
	}

	cons.WaitFor(t, 60*time.Second, "the valid rows", hasAll(good))
	testenv.Eventually(t, 30*time.Second, "the slot to confirm past every row", func() bool { return e.F.SlotConfirmed(t) >= end })
	recs := cons.Records()
	assertCleanDelivery(t, recs, good, nil)
	for _, r := range recs {
		for _, k := range []string{"outbox-id", "outbox-table", "aggregate-id", "cdc-lsn", "cdc-commit-time"} {
			if n := headerCount(r, k); n != 1 {
				t.Errorf("record %s: %d %s headers, want 1: %v", testenv.Header(r, "outbox-id"), n, k, r.Headers)
			}
		}
		if got := testenv.Header(r, "outbox-table"); got != e.F.Table {
			t.Errorf("record %s: outbox-table %q, want %s", testenv.Header(r, "outbox-id"), got, e.F.Table)
		}
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
}
