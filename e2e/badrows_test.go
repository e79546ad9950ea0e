package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Rows that cannot become a record (NULL or empty key, NULL topic with no --topic, NULL
// payload, headers that are not an object, a table in the publication without the mapped
// columns) are dead-lettered with the reason, the original key, value and headers, the outbox
// id and the commit LSN; the good rows around them are published and the slot moves past all
// of them: never a silent drop, never a stall.
func TestBadRowsAreDeadLetteredAndTheStreamGoesOn(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t)
	odd := tableOfItsOwn(t, f, "_odd", `(id bigserial primary key, key text, body jsonb)`)
	e := testenv.RelayEnvOf(t, f, true)
	e.CreateSlot(t, f.Table+","+odd)
	p := e.Start(t, nil)
	cons := testenv.Consume(t, f.Topic)
	dlq := testenv.Consume(t, f.DLQ)

	row := `aggregate_id, topic, payload, headers`
	good1 := f.InsertValues(t, f.Table, row, `'k1', $1, '{"n": 1}', NULL`, f.Topic)
	type bad struct {
		id     int64
		key    string
		value  string
		reason string
	}
	bads := []bad{
		{f.InsertValues(t, f.Table, row, `NULL, $1, '{"n": 2}', '{"correlation-id": "c-2"}'`, f.Topic), "", `{"n": 2}`, `column "aggregate_id": aggregate_id is NULL`},
		{f.InsertValues(t, f.Table, row, `'', $1, '{"n": 3}', NULL`, f.Topic), "", `{"n": 3}`, `column "aggregate_id": aggregate_id is empty`},
		{f.InsertValues(t, f.Table, row, `'k3', NULL, '{"n": 4}', NULL`), "k3", `{"n": 4}`, `column "topic": topic is NULL`},
		{f.InsertValues(t, f.Table, row, `'k4', $1, NULL, NULL`, f.Topic), "k4", "", `column "payload": payload is NULL`},
		{f.InsertValues(t, f.Table, row, `'k5', $1, '{"n": 6}', '[1, 2]'`, f.Topic), "k5", `{"n": 6}`, `column "headers": headers is not a JSON object`},
		{f.InsertValues(t, odd, `key, body`, `'k6', '{"n": 7}'`), "", "", `column "aggregate_id": mapped column is not in the relation`},
	}
	good2 := f.InsertValues(t, f.Table, row, `'k1', $1, '{"n": 8}', NULL`, f.Topic)
	end := f.CurrentWAL(t)

	recs := dlq.WaitFor(t, 60*time.Second, "every bad row on the dead-letter topic", func(r []*kgo.Record) bool { return len(r) >= len(bads) })
	byID := map[string]*kgo.Record{}
	for _, r := range recs {
		byID[testenv.Header(r, "outbox-id")] = r
	}
	for _, b := range bads {
		id := strconv.FormatInt(b.id, 10)
		r := byID[id]
		if r == nil {
			t.Errorf("bad row %d (%s) not dead-lettered", b.id, b.reason)
			continue
		}
		if errText := testenv.Header(r, "dlq-error"); !strings.Contains(errText, b.reason) || !strings.Contains(errText, "bad row") {
			t.Errorf("row %d: dlq-error %q, want it to contain %q", b.id, errText, b.reason)
		}
		if string(r.Key) != b.key {
			t.Errorf("row %d: key %q, want %q", b.id, r.Key, b.key)
		}
		if b.value != "" && !jsonEqual(t, r.Value, []byte(b.value)) {
			t.Errorf("row %d: value %s, want %s", b.id, r.Value, b.value)
		}
		if testenv.Header(r, "dlq-relation") == "" || lsnOf(t, r) == 0 {
			t.Errorf("row %d: no relation or LSN in the dead letter: %v", b.id, r.Headers)
		}
	}
	if r := byID[strconv.FormatInt(bads[0].id, 10)]; r != nil && testenv.Header(r, "correlation-id") != "c-2" {
		t.Errorf("the row's own headers were not kept in the dead letter: %v", r.Headers)
	}
	if r := byID[strconv.FormatInt(bads[5].id, 10)]; r != nil && testenv.Header(r, "dlq-relation") != odd {
		t.Errorf("dlq-relation %q, want %s", testenv.Header(r, "dlq-relation"), odd)
	}

	// The good rows on both sides are published, and nothing else is.
	got := cons.WaitFor(t, 60*time.Second, "the good rows", hasAll([]int64{good1, good2}))
	if len(got) != 2 {
		t.Errorf("%d records on the topic, want the 2 good rows", len(got))
	}
	// No stall: the slot confirms past the last bad row.
	testenv.Eventually(t, 30*time.Second, "the slot to confirm past every row", func() bool { return f.SlotConfirmed(t) >= end })
	if n := strings.Count(p.Output(), "bad row: dead-lettering it"); n != len(bads) {
		t.Errorf("%d bad rows logged, want %d", n, len(bads))
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
}
