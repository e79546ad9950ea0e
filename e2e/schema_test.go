package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Schema changes mid-stream follow the new Relation messages: a column added to the outbox
// (a mapped optional one, and one the relay does not map) is used by the rows that have it; a
// mapped column renamed away makes rows bad (dead-lettered, the stream goes on) until it is
// renamed back; a second outbox table added to the publication is published from its first
// row, without a restart.
func TestSchemaChangesMidStream(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := f.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`ALTER TABLE ` + f.Table + ` DROP COLUMN event_type`)
	p := e.Start(t, nil)
	cons := testenv.Consume(t, f.Topic)
	dlq := testenv.Consume(t, f.DLQ)
	byID := func(recs []*kgo.Record, id int64) *kgo.Record {
		for _, r := range recs {
			if testenv.Header(r, "outbox-id") == strconv.FormatInt(id, 10) {
				return r
			}
		}
		return nil
	}

	before := f.InsertValues(t, f.Table, `aggregate_id, topic, payload`, `'k1', $1, '{"n": 1}'`, f.Topic)
	cons.WaitFor(t, 30*time.Second, "a row before any change", hasAll([]int64{before}))

	// ADD COLUMN: the mapped optional event_type, and a column the relay does not know.
	exec(`ALTER TABLE ` + f.Table + ` ADD COLUMN event_type text, ADD COLUMN tenant text`)
	added := f.InsertValues(t, f.Table, `aggregate_id, topic, payload, event_type, tenant`, `'k1', $1, '{"n": 2}', 'order.created', 'acme'`, f.Topic)
	recs := cons.WaitFor(t, 30*time.Second, "a row using the added columns", hasAll([]int64{added}))
	if r := byID(recs, added); testenv.Header(r, "event-type") != "order.created" {
		t.Errorf("the added event_type column was not mapped: headers %v", r.Headers)
	}
	if r := byID(recs, before); testenv.Header(r, "event-type") != "" {
		t.Errorf("a row from before the column existed has event-type %q", testenv.Header(r, "event-type"))
	}

	// RENAME a mapped column away: bad rows, dead-lettered with the reason; then back.
	exec(`ALTER TABLE ` + f.Table + ` RENAME COLUMN aggregate_id TO agg_id`)
	renamed := f.InsertValues(t, f.Table, `agg_id, topic, payload`, `'k1', $1, '{"n": 3}'`, f.Topic)
	exec(`ALTER TABLE ` + f.Table + ` RENAME COLUMN agg_id TO aggregate_id`)
	back := f.InsertValues(t, f.Table, `aggregate_id, topic, payload`, `'k1', $1, '{"n": 4}'`, f.Topic)
	dl := dlq.WaitFor(t, 30*time.Second, "the row written while aggregate_id was renamed", hasAll([]int64{renamed}))
	if r := byID(dl, renamed); !strings.Contains(testenv.Header(r, "dlq-error"), `column "aggregate_id": mapped column is not in the relation`) {
		t.Errorf("dlq-error %q", testenv.Header(r, "dlq-error"))
	}

	// A second outbox table joins the publication.
	second := f.Table + "_second"
	exec(testenv.OutboxDDL(second))
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+second) })
	exec(`SELECT setval(pg_get_serial_sequence($1, 'id'), 1000)`, second) // ids apart from the first table's
	if out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, e.Env, "slot", "create", "--table", f.Table+","+second); code != 0 ||
		!strings.Contains(out, "added to publication") {
		t.Fatalf("slot create --table %s: exit %d\n%s%s", second, code, out, errOut)
	}
	fromSecond := f.InsertValues(t, second, `aggregate_id, topic, payload`, `'k9', $1, '{"n": 5}'`, f.Topic)
	after := f.InsertValues(t, f.Table, `aggregate_id, topic, payload`, `'k1', $1, '{"n": 6}'`, f.Topic)

	recs = cons.WaitFor(t, 30*time.Second, "rows after every change", hasAll([]int64{back, fromSecond, after}))
	if byID(recs, renamed) != nil {
		t.Errorf("the row without aggregate_id was published")
	}
	if r := byID(recs, fromSecond); string(r.Key) != "k9" {
		t.Errorf("row of the second table: key %q", r.Key)
	}
	// Per key in commit order: before, added, back, after.
	var order []string
	for _, r := range recs {
		if string(r.Key) == "k1" {
			order = append(order, testenv.Header(r, "outbox-id"))
		}
	}
	want := []string{strconv.FormatInt(before, 10), strconv.FormatInt(added, 10), strconv.FormatInt(back, 10), strconv.FormatInt(after, 10)}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("key k1 arrived as %v, want %v", order, want)
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
}
