package decoder

import (
	"errors"
	"github.com/cdc-relay/cdc-relay/outbox"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

const outboxID = 16385

var (
	commitAt = time.Date(2024, 3, 1, 12, 30, 45, 123456000, time.UTC)

	// outboxCols is the design card's table plus the optional columns.
	outboxCols = []col{
		{"id", oidInt8}, {"aggregate_id", oidText}, {"topic", oidText}, {"payload", oidJSONB},
		{"created_at", oidTS}, {"published_at", oidTS}, {"event_type", oidText}, {"headers", oidJSONB},
	}
)

// outboxRow is an Insert into outboxCols.
func outboxRow(id, key, topic, payload tv, eventType, headers tv) []byte {
	return insertMsg(outboxID, id, key, topic, payload, txt("2024-03-01 12:30:45.123456+00"), null, eventType, headers)
}

func newDecoder(t testing.TB, cfg Config) *Decoder {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

func decode(t testing.TB, d *Decoder, lsn pglogrepl.LSN, data []byte) Output {
	t.Helper()
	out, err := d.Decode(lsn, data)
	if err != nil {
		t.Fatalf("Decode(%s, %q): %v", lsn, data, err)
	}
	return out
}

// openTx decodes the outbox Relation and a Begin.
func openTx(t testing.TB, d *Decoder) {
	t.Helper()
	decode(t, d, 0x16B3700, relationMsg(outboxID, "public", "outbox", outboxCols...))
	decode(t, d, 0x16B3700, beginMsg(0x16B3800, commitAt, 777))
}

func TestTransaction(t *testing.T) {
	d := newDecoder(t, Config{})
	if out := decode(t, d, 0x16B3700, relationMsg(outboxID, "public", "outbox", outboxCols...)); out.Kind != KindNone {
		t.Fatalf("Relation: Kind = %v, want None", out.Kind)
	}
	if d.InTransaction() {
		t.Fatal("InTransaction before Begin")
	}

	out := decode(t, d, 0x16B3700, beginMsg(0x16B3800, commitAt.In(time.FixedZone("X", 3600)), 777))
	want := Output{Kind: KindBegin, Xid: 777, CommitLSN: 0x16B3800, CommitTime: commitAt}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("Begin = %+v\nwant %+v", out, want)
	}
	if out.CommitTime.Location() != time.UTC {
		t.Errorf("CommitTime location = %v, want UTC", out.CommitTime.Location())
	}
	if !d.InTransaction() {
		t.Fatal("not InTransaction after Begin")
	}

	rows := []struct {
		lsn  pglogrepl.LSN
		data []byte
		want outbox.Event
	}{
		{0x16B3748, outboxRow(txt("42"), txt("order-1"), txt("orders"), txt(`{"total": 10}`), txt("OrderPlaced"),
			txt(`{"traceparent": "00-abc-01", "correlation_id": "c-1"}`)),
			outbox.Event{ID: "42", AggregateID: "order-1", Topic: "orders", Payload: []byte(`{"total": 10}`), EventType: "OrderPlaced",
				Headers: []outbox.Header{{Key: "correlation_id", Value: []byte("c-1")}, {Key: "traceparent", Value: []byte("00-abc-01")}}, Relation: "public.outbox"}},
		{0x16B3790, outboxRow(txt("43"), txt("order-2"), txt("payments"), txt(`[1, 2]`), null, null),
			outbox.Event{ID: "43", AggregateID: "order-2", Topic: "payments", Payload: []byte(`[1, 2]`), Relation: "public.outbox"}},
	}
	for _, r := range rows {
		out := decode(t, d, r.lsn, r.data)
		want := Output{Kind: KindEvent, Xid: 777, CommitLSN: 0x16B3800, CommitTime: commitAt, Event: r.want}
		if !reflect.DeepEqual(out, want) {
			t.Errorf("Insert at %s = %+v\nwant %+v", r.lsn, out, want)
		}
	}

	out = decode(t, d, 0x16B3800, commitMsg(0x16B3800, 0x16B3830, commitAt))
	want = Output{Kind: KindCommit, Xid: 777, CommitLSN: 0x16B3800, EndLSN: 0x16B3830, CommitTime: commitAt}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("Commit = %+v\nwant %+v", out, want)
	}
	if d.InTransaction() {
		t.Fatal("InTransaction after Commit")
	}
}

func TestRequiredColumnsOnly(t *testing.T) {
	// The design card's table without the optional columns.
	d := newDecoder(t, Config{})
	decode(t, d, 1, relationMsg(7, "public", "outbox",
		col{"id", oidInt8}, col{"aggregate_id", oidText}, col{"topic", oidText}, col{"payload", oidJSONB},
		col{"created_at", oidTS}, col{"published_at", oidTS}))
	decode(t, d, 1, beginMsg(10, commitAt, 1))
	out := decode(t, d, 2, insertMsg(7, txt("1"), txt("a"), txt("t"), txt(`{}`), txt("now"), null))
	want := outbox.Event{ID: "1", AggregateID: "a", Topic: "t", Payload: []byte(`{}`), Relation: "public.outbox"}
	if !reflect.DeepEqual(out.Event, want) {
		t.Errorf("Event = %+v, want %+v", out.Event, want)
	}
}

func TestHeaders(t *testing.T) {
	tests := []struct {
		name    string
		headers tv
		want    []outbox.Header
	}{
		{"NULL", null, nil},
		{"empty object", txt(`{}`), nil},
		{"JSON null", txt(`null`), nil},
		{"sorted, non-string values as JSON text", txt(`{"z": "last", "b": 1.5, "a": {"x": [true, null]}, "n": null, "t": false, "esc": "q\"\u00e9\n"}`),
			[]outbox.Header{
				{Key: "a", Value: []byte(`{"x": [true, null]}`)},
				{Key: "b", Value: []byte(`1.5`)},
				{Key: "esc", Value: []byte("q\"é\n")},
				{Key: "n", Value: []byte(`null`)},
				{Key: "t", Value: []byte(`false`)},
				{Key: "z", Value: []byte(`last`)},
			}},
		{"empty key and value", txt(`{"": ""}`), []outbox.Header{{Key: "", Value: []byte{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{})
			openTx(t, d)
			out := decode(t, d, 5, outboxRow(txt("1"), txt("k"), txt("t"), txt(`{}`), txt("E"), tt.headers))
			if !reflect.DeepEqual(out.Event.Headers, tt.want) {
				t.Errorf("Headers = %q, want %q", out.Event.Headers, tt.want)
			}
			if out.Event.EventType != "E" {
				t.Errorf("EventType = %q, want E", out.Event.EventType)
			}
		})
	}
}

func TestEventTypeAbsentOrNull(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	for _, et := range []tv{null, toast} {
		out := decode(t, d, 5, outboxRow(txt("1"), txt("k"), txt("t"), txt(`{}`), et, null))
		if out.Event.EventType != "" {
			t.Errorf("EventType for %c = %q, want empty", et.kind, out.Event.EventType)
		}
	}
	// Interning must not leak one row's event type into the next.
	for _, et := range []string{"A", "B", "A", ""} {
		out := decode(t, d, 5, outboxRow(txt("1"), txt("k"), txt("t"), txt(`{}`), txt(et), null))
		if out.Event.EventType != et {
			t.Errorf("EventType = %q, want %q", out.Event.EventType, et)
		}
	}
}

func TestCustomColumns(t *testing.T) {
	d := newDecoder(t, Config{
		Columns: outbox.Columns{ID: "event_id", AggregateID: "entity", Topic: "stream", Payload: "body", EventType: "kind", Headers: "meta"},
		Tables:  []string{"events.out"},
	})
	decode(t, d, 1, relationMsg(9, "events", "out",
		col{"body", oidText}, col{"kind", oidText}, col{"event_id", oidInt8}, col{"meta", oidJSONB},
		col{"entity", oidText}, col{"stream", oidText}, col{"aggregate_id", oidText}, col{"payload", oidJSONB}))
	decode(t, d, 1, beginMsg(10, commitAt, 1))
	out := decode(t, d, 2, insertMsg(9, txt("hello"), txt("Greeted"), txt("5"), txt(`{"h": "v"}`),
		txt("user-9"), txt("greetings"), txt("not the key"), txt("not the payload")))
	want := outbox.Event{ID: "5", AggregateID: "user-9", Topic: "greetings", Payload: []byte("hello"), EventType: "Greeted",
		Headers: []outbox.Header{{Key: "h", Value: []byte("v")}}, Relation: "events.out"}
	if !reflect.DeepEqual(out.Event, want) {
		t.Errorf("Event = %+v\nwant %+v", out.Event, want)
	}
}

func TestSameColumnForTwoRoles(t *testing.T) {
	// Not useful, but not ambiguous either: both roles read the column.
	d := newDecoder(t, Config{Columns: outbox.Columns{AggregateID: "id"}, Topic: "t"})
	decode(t, d, 1, relationMsg(9, "public", "o", col{"id", oidInt8}, col{"payload", oidJSONB}))
	decode(t, d, 1, beginMsg(10, commitAt, 1))
	out := decode(t, d, 2, insertMsg(9, txt("5"), txt("{}")))
	if out.Event.ID != "5" || out.Event.AggregateID != "5" {
		t.Errorf("Event = %+v", out.Event)
	}
}

func TestTablesFilter(t *testing.T) {
	d := newDecoder(t, Config{Tables: []string{"outbox", "audit.outbox"}})
	decode(t, d, 1, relationMsg(1, "public", "outbox", outboxCols...))
	decode(t, d, 1, relationMsg(2, "audit", "outbox", outboxCols...))
	decode(t, d, 1, relationMsg(3, "other", "outbox", outboxCols...))
	decode(t, d, 1, relationMsg(4, "public", "orders", col{"id", oidInt8}, col{"total", oidInt8}))
	decode(t, d, 1, beginMsg(10, commitAt, 1))

	row := func(rel uint32) []byte {
		return insertMsg(rel, txt("1"), txt("k"), txt("t"), txt("{}"), txt("now"), null, null, null)
	}
	for rel, want := range map[uint32]string{1: "public.outbox", 2: "audit.outbox"} {
		out := decode(t, d, 2, row(rel))
		if out.Kind != KindEvent || out.Event.Relation != want {
			t.Errorf("relation %d: Kind %v, Relation %q; want Event in %s", rel, out.Kind, out.Event.Relation, want)
		}
	}
	if out := decode(t, d, 2, row(3)); out.Kind != KindNone {
		t.Errorf("other.outbox: Kind = %v, want None", out.Kind)
	}
	if out := decode(t, d, 2, insertMsg(4, txt("1"), txt("100"))); out.Kind != KindNone {
		t.Errorf("public.orders: Kind = %v, want None", out.Kind)
	}
}

func TestNoFilterDecodesEveryRelation(t *testing.T) {
	// Without Tables the publication decides; a table that is not an outbox is a bad row, never a
	// silent drop.
	d := newDecoder(t, Config{})
	decode(t, d, 1, relationMsg(4, "public", "orders", col{"id", oidInt8}, col{"total", oidInt8}))
	decode(t, d, 1, beginMsg(10, commitAt, 1))
	out, err := d.Decode(2, insertMsg(4, txt("1"), txt("100")))
	if out.Kind != KindEvent || !errors.Is(err, outbox.ErrMissingColumn) {
		t.Errorf("Kind %v, err %v; want Event and outbox.ErrMissingColumn", out.Kind, err)
	}
}

func TestConfigTopic(t *testing.T) {
	d := newDecoder(t, Config{Topic: "fixed"})
	// No topic column at all.
	decode(t, d, 1, relationMsg(1, "public", "outbox", col{"id", oidInt8}, col{"aggregate_id", oidText}, col{"payload", oidJSONB}))
	// A topic column that is NULL: not read.
	decode(t, d, 1, relationMsg(2, "public", "outbox2", outboxCols...))
	decode(t, d, 1, beginMsg(10, commitAt, 1))
	for _, m := range [][]byte{
		insertMsg(1, txt("1"), txt("k"), txt("{}")),
		insertMsg(2, txt("1"), txt("k"), null, txt("{}"), txt("now"), null, null, null),
		insertMsg(2, txt("1"), txt("k"), txt("ignored"), txt("{}"), txt("now"), null, null, null),
	} {
		if out := decode(t, d, 2, m); out.Event.Topic != "fixed" {
			t.Errorf("Topic = %q, want fixed", out.Event.Topic)
		}
	}
}

func TestTopicInterning(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	for _, topic := range []string{"a", "a", "b", "a"} {
		out := decode(t, d, 2, outboxRow(txt("1"), txt("k"), txt(topic), txt("{}"), null, null))
		if out.Event.Topic != topic {
			t.Errorf("Topic = %q, want %q", out.Event.Topic, topic)
		}
	}
}

func TestBadRows(t *testing.T) {
	const lsn = pglogrepl.LSN(0x16B3748)
	ok := map[string]tv{"id": txt("42"), "key": txt("order-1"), "topic": txt("orders"), "payload": txt(`{"a": 1}`),
		"event_type": null, "headers": null}
	tests := []struct {
		name     string
		set      map[string]tv
		sentinel error
		column   string
		id       string
		payload  string
	}{
		{"NULL key", map[string]tv{"key": null}, outbox.ErrNullKey, "aggregate_id", "42", `{"a": 1}`},
		{"unchanged TOAST key", map[string]tv{"key": toast}, outbox.ErrNullKey, "aggregate_id", "42", `{"a": 1}`},
		{"empty key", map[string]tv{"key": txt("")}, outbox.ErrEmptyKey, "aggregate_id", "42", `{"a": 1}`},
		{"binary key", map[string]tv{"key": bin("\x00\x01")}, outbox.ErrBinaryValue, "aggregate_id", "42", `{"a": 1}`},
		{"NULL topic", map[string]tv{"topic": null}, outbox.ErrNullTopic, "topic", "42", `{"a": 1}`},
		{"empty topic", map[string]tv{"topic": txt("")}, outbox.ErrEmptyTopic, "topic", "42", `{"a": 1}`},
		{"NULL payload", map[string]tv{"payload": null}, outbox.ErrNullPayload, "payload", "42", ""},
		{"unchanged TOAST payload", map[string]tv{"payload": toast}, outbox.ErrNullPayload, "payload", "42", ""},
		{"binary payload", map[string]tv{"payload": bin("\x01{}")}, outbox.ErrBinaryValue, "payload", "42", ""},
		{"NULL id", map[string]tv{"id": null}, outbox.ErrNullID, "id", "", `{"a": 1}`},
		{"empty id", map[string]tv{"id": txt("")}, outbox.ErrNullID, "id", "", `{"a": 1}`},
		{"headers not JSON", map[string]tv{"headers": txt(`{"a": `)}, outbox.ErrBadHeaders, "headers", "42", `{"a": 1}`},
		{"headers an array", map[string]tv{"headers": txt(`["a"]`)}, outbox.ErrBadHeaders, "headers", "42", `{"a": 1}`},
		{"headers a string", map[string]tv{"headers": txt(`"a"`)}, outbox.ErrBadHeaders, "headers", "42", `{"a": 1}`},
		{"binary headers", map[string]tv{"headers": bin(`{}`)}, outbox.ErrBinaryValue, "headers", "42", `{"a": 1}`},
		{"header outbox-id", map[string]tv{"headers": txt(`{"outbox-id": "1"}`)}, outbox.ErrReservedHeader, "headers", "42", `{"a": 1}`},
		{"header outbox-table", map[string]tv{"headers": txt(`{"outbox-table": "x.y"}`)}, outbox.ErrReservedHeader, "headers", "42", `{"a": 1}`},
		{"header aggregate-id", map[string]tv{"headers": txt(`{"aggregate-id": "k"}`)}, outbox.ErrReservedHeader, "headers", "42", `{"a": 1}`},
		{"header event-type", map[string]tv{"headers": txt(`{"event-type": "e"}`)}, outbox.ErrReservedHeader, "headers", "42", `{"a": 1}`},
		{"header cdc-lsn", map[string]tv{"headers": txt(`{"cdc-lsn": "0/1"}`)}, outbox.ErrReservedHeader, "headers", "42", `{"a": 1}`},
		{"header cdc-commit-time", map[string]tv{"headers": txt(`{"cdc-commit-time": 1}`)}, outbox.ErrReservedHeader, "headers", "42", `{"a": 1}`},
		{"header dlq-error", map[string]tv{"headers": txt(`{"dlq-error": "x"}`)}, outbox.ErrReservedHeader, "headers", "42", `{"a": 1}`},
		{"header dlq-anything", map[string]tv{"headers": txt(`{"dlq-anything": "x"}`)}, outbox.ErrReservedHeader, "headers", "42", `{"a": 1}`},
		{"header Outbox-ID, any case", map[string]tv{"headers": txt(`{"Outbox-ID": "1"}`)}, outbox.ErrReservedHeader, "headers", "42", `{"a": 1}`},
		{"binary event_type", map[string]tv{"event_type": bin("x")}, outbox.ErrBinaryValue, "event_type", "42", `{"a": 1}`},
		{"first problem wins", map[string]tv{"key": null, "payload": null}, outbox.ErrNullKey, "aggregate_id", "42", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := func(k string) tv {
				if x, ok := tt.set[k]; ok {
					return x
				}
				return ok[k]
			}
			d := newDecoder(t, Config{})
			openTx(t, d)
			out, err := d.Decode(lsn, outboxRow(v("id"), v("key"), v("topic"), v("payload"), v("event_type"), v("headers")))
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("err = %v, want %v", err, tt.sentinel)
			}
			if !outbox.IsBadRow(err) || errors.Is(err, ErrProtocol) {
				t.Fatalf("outbox.IsBadRow = %v, Is(ErrProtocol) = %v; want a bad row", outbox.IsBadRow(err), errors.Is(err, ErrProtocol))
			}
			var re *outbox.RowError
			errors.As(err, &re)
			want := outbox.RowError{LSN: lsn, Relation: "public.outbox", Column: tt.column, ID: tt.id}
			if re.LSN != want.LSN || re.Relation != want.Relation || re.Column != want.Column || re.ID != want.ID {
				t.Errorf("outbox.RowError = %+v, want %+v", re, want)
			}
			if out.Kind != KindEvent || out.Xid != 777 || out.CommitLSN != 0x16B3800 || !out.CommitTime.Equal(commitAt) {
				t.Errorf("Output = %+v, want a KindEvent of the open transaction", out)
			}
			if out.Event.ID != tt.id || out.Event.Relation != "public.outbox" || string(out.Event.Payload) != tt.payload {
				t.Errorf("Event = %+v, want ID %q, Relation public.outbox, Payload %q", out.Event, tt.id, tt.payload)
			}
			// The decoder goes on.
			if out := decode(t, d, lsn+1, outboxRow(txt("43"), txt("k"), txt("t"), txt("{}"), null, null)); out.Event.ID != "43" {
				t.Errorf("next row: %+v", out)
			}
			if out := decode(t, d, lsn+2, commitMsg(0x16B3800, 0x16B3830, commitAt)); out.Kind != KindCommit {
				t.Errorf("Commit: %+v", out)
			}
		})
	}
}

func TestRowErrorMessage(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	_, err := d.Decode(0x16B3748, outboxRow(txt("42"), null, txt("t"), txt("{}"), null, null))
	const want = `outbox: bad row at 0/16B3748 in public.outbox (id 42), column "aggregate_id": aggregate_id is NULL`
	if err == nil || err.Error() != want {
		t.Errorf("Error() = %v\nwant     %s", err, want)
	}
	_, err = d.Decode(0x16B3748, outboxRow(txt("42"), txt("k"), txt("t"), txt("{}"), null, txt(`{"a": `)))
	if err == nil || !strings.HasPrefix(err.Error(), `outbox: bad row at 0/16B3748 in public.outbox (id 42), column "headers": headers is not a JSON object: `) {
		t.Errorf("Error() = %v", err)
	}
}

// A row header named like a contract header is refused, never added beside the relay's own:
// the reason names every reserved header, and the Event keeps the row's other headers for the
// dead letter.
func TestReservedHeaderNames(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	out, err := d.Decode(0x16B3748, outboxRow(txt("42"), txt("k"), txt("t"), txt("{}"), null,
		txt(`{"outbox-id": "1", "correlation-id": "c-1", "CDC-LSN": "0/1"}`)))
	const want = `outbox: bad row at 0/16B3748 in public.outbox (id 42), column "headers": headers: "CDC-LSN", "outbox-id" are reserved by the record contract`
	if err == nil || err.Error() != want || !errors.Is(err, outbox.ErrReservedHeader) || !outbox.IsBadRow(err) {
		t.Fatalf("err = %v\nwant      %s", err, want)
	}
	if !reflect.DeepEqual(out.Event.Headers, []outbox.Header{{Key: "correlation-id", Value: []byte("c-1")}}) {
		t.Errorf("Headers = %q, want only correlation-id", out.Event.Headers)
	}
	// Only reserved names: no headers left.
	out, err = d.Decode(0x16B3749, outboxRow(txt("43"), txt("k"), txt("t"), txt("{}"), null, txt(`{"outbox-id": "1"}`)))
	if !errors.Is(err, outbox.ErrReservedHeader) || out.Event.Headers != nil {
		t.Errorf("err = %v, Headers = %q", err, out.Event.Headers)
	}
	// Names that only look alike are the row's own.
	out = decode(t, d, 0x16B374A, outboxRow(txt("44"), txt("k"), txt("t"), txt("{}"), null,
		txt(`{"outbox_id": "1", "x-outbox-id": "2", "dlq": "3", "cdc-lsn-of-origin": "4"}`)))
	if len(out.Event.Headers) != 4 {
		t.Errorf("Headers = %q, want all four", out.Event.Headers)
	}
}

// TestAlterTable pins following ALTER TABLE mid-stream: columns are mapped by name from the newest
// Relation message, not by position.
func TestAlterTable(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	if out := decode(t, d, 2, outboxRow(txt("1"), txt("k1"), txt("t"), txt("{}"), null, null)); out.Event.AggregateID != "k1" {
		t.Fatalf("before ALTER: %+v", out.Event)
	}
	// ALTER TABLE outbox ADD COLUMN tenant text, and a shape where the columns come in another order.
	decode(t, d, 3, relationMsg(outboxID, "public", "outbox",
		col{"tenant", oidText}, col{"payload", oidJSONB}, col{"topic", oidText}, col{"id", oidInt8},
		col{"headers", oidJSONB}, col{"aggregate_id", oidText}, col{"event_type", oidText}))
	if !d.InTransaction() {
		t.Fatal("a Relation message ended the transaction")
	}
	out := decode(t, d, 4, insertMsg(outboxID, txt("acme"), txt(`{"v": 2}`), txt("t2"), txt("2"), txt(`{"h": "1"}`), txt("k2"), txt("E2")))
	want := outbox.Event{ID: "2", AggregateID: "k2", Topic: "t2", Payload: []byte(`{"v": 2}`), EventType: "E2",
		Headers: []outbox.Header{{Key: "h", Value: []byte("1")}}, Relation: "public.outbox"}
	if !reflect.DeepEqual(out.Event, want) {
		t.Errorf("after ALTER: %+v\nwant %+v", out.Event, want)
	}
	// A tuple of the old shape after the new Relation is a protocol error, not a guess.
	_, err := d.Decode(5, outboxRow(txt("3"), txt("k"), txt("t"), txt("{}"), null, null))
	if !errors.Is(err, ErrProtocol) || outbox.IsBadRow(err) {
		t.Errorf("old-shape tuple: err = %v, want ErrProtocol", err)
	}
}

func TestDroppedColumn(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	// ALTER TABLE outbox DROP COLUMN topic, DROP COLUMN headers (headers is optional).
	decode(t, d, 3, relationMsg(outboxID, "public", "outbox",
		col{"id", oidInt8}, col{"aggregate_id", oidText}, col{"payload", oidJSONB}))
	out, err := d.Decode(0x200, insertMsg(outboxID, txt("7"), txt("k"), txt("{}")))
	var re *outbox.RowError
	if !errors.As(err, &re) || !errors.Is(err, outbox.ErrMissingColumn) {
		t.Fatalf("err = %v, want a outbox.RowError for outbox.ErrMissingColumn", err)
	}
	if re.Column != "topic" || re.ID != "7" || re.Relation != "public.outbox" || re.LSN != 0x200 {
		t.Errorf("outbox.RowError = %+v", re)
	}
	if out.Kind != KindEvent || out.Event.AggregateID != "k" || string(out.Event.Payload) != "{}" {
		t.Errorf("Output = %+v", out)
	}
	// ALTER TABLE outbox ADD COLUMN topic: rows are good again.
	decode(t, d, 3, relationMsg(outboxID, "public", "outbox",
		col{"id", oidInt8}, col{"aggregate_id", oidText}, col{"payload", oidJSONB}, col{"topic", oidText}))
	if out := decode(t, d, 0x300, insertMsg(outboxID, txt("8"), txt("k"), txt("{}"), txt("t"))); out.Event.Topic != "t" {
		t.Errorf("after re-adding topic: %+v", out.Event)
	}
}

func TestIgnoredMessages(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	row := []tv{txt("1"), txt("k"), txt("t"), txt("{}"), txt("now"), null, null, null}
	for name, m := range map[string][]byte{
		"Update":              updateMsg(outboxID, nil, row...),
		"Update with old row": updateMsg(outboxID, row, row...),
		"Delete":              deleteMsg(outboxID, txt("1")),
		"Truncate":            truncateMsg(outboxID, 99),
		"Origin":              originMsg(0x10, "upstream"),
		"Type":                typeMsg(16400, "public", "mood"),
		"foreign message":     logicalMsg(true, 0x10, "audit", `{"key": "k", "topic": "t", "payload": 1}`),
		"foreign non-tx msg":  logicalMsg(false, 0x10, "audit", `not json`),
		"prefix of ours":      logicalMsg(true, 0x10, "outbox2", `{}`),
		"Update unknown rel":  updateMsg(12345, nil, txt("1")),
	} {
		out, err := d.Decode(0x20, m)
		if err != nil || !reflect.DeepEqual(out, Output{}) {
			t.Errorf("%s: %+v, %v; want KindNone", name, out, err)
		}
	}
	if !d.InTransaction() {
		t.Error("an ignored message ended the transaction")
	}
}

func TestBeginInsideTransactionRestarts(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	decode(t, d, 2, outboxRow(txt("1"), txt("k"), txt("t"), txt("{}"), null, null))
	// The connection dropped before Commit; the replay starts the transaction again.
	out := decode(t, d, 0x16B3700, beginMsg(0x16B3900, commitAt.Add(time.Second), 778))
	if out.Kind != KindBegin || out.Xid != 778 || out.CommitLSN != 0x16B3900 {
		t.Fatalf("second Begin = %+v", out)
	}
	out = decode(t, d, 3, outboxRow(txt("1"), txt("k"), txt("t"), txt("{}"), null, null))
	if out.Xid != 778 || out.CommitLSN != 0x16B3900 || !out.CommitTime.Equal(commitAt.Add(time.Second)) {
		t.Errorf("Event after restart = %+v", out)
	}
	out = decode(t, d, 4, commitMsg(0x16B3900, 0x16B3930, commitAt.Add(time.Second)))
	if out.Kind != KindCommit || out.Xid != 778 || out.EndLSN != 0x16B3930 {
		t.Errorf("Commit = %+v", out)
	}
}

func TestProtocolErrors(t *testing.T) {
	tests := []struct {
		name    string
		prepare [][]byte
		msg     []byte
		unknown bool
	}{
		{"Commit without Begin", nil, commitMsg(1, 2, commitAt), false},
		{"Insert outside a transaction", [][]byte{relationMsg(outboxID, "public", "outbox", outboxCols...)},
			outboxRow(txt("1"), txt("k"), txt("t"), txt("{}"), null, null), false},
		{"Insert for an unknown relation", [][]byte{beginMsg(1, commitAt, 1)},
			insertMsg(99, txt("1")), true},
		{"transactional message outside a transaction", nil, logicalMsg(true, 1, "outbox", `{}`), false},
		{"empty message", nil, []byte{}, false},
		{"unknown type", nil, []byte("Z123"), false},
		{"Stream Start (v2)", nil, msg{'S'}.u32(1).u8(1), false},
		{"Stream Stop (v2)", nil, []byte{'E'}, false},
		{"Stream Commit (v2)", nil, msg{'c'}.u32(1).u8(0).u64(1).u64(2).u64(3), false},
		{"Stream Abort (v2)", nil, msg{'A'}.u32(1).u32(1), false},
		{"Insert with old tuple marker", [][]byte{beginMsg(1, commitAt, 1)}, msg{'I'}.u32(outboxID).u8('K').tuple(txt("1")), false},
		{"unknown tuple kind", [][]byte{relationMsg(1, "public", "o", col{"id", oidInt8}), beginMsg(1, commitAt, 1)},
			insertMsg(1, tv{kind: 'x'}), false},
		{"Begin with trailing bytes", nil, append(beginMsg(1, commitAt, 1), 0), false},
		{"Delete with new tuple marker", nil, msg{'D'}.u32(1).u8('N').tuple(txt("1")), false},
		{"Truncate with short id list", nil, msg{'T'}.u32(2).u8(0).u32(1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{})
			for _, m := range tt.prepare {
				decode(t, d, 1, m)
			}
			inTx := d.InTransaction()
			out, err := d.Decode(0x16B3748, tt.msg)
			var pe *ProtocolError
			if !errors.As(err, &pe) || !errors.Is(err, ErrProtocol) || outbox.IsBadRow(err) {
				t.Fatalf("err = %v, want a ProtocolError", err)
			}
			if pe.LSN != 0x16B3748 || (len(tt.msg) > 0 && byte(pe.Type) != tt.msg[0]) {
				t.Errorf("ProtocolError = %+v", pe)
			}
			if errors.Is(err, ErrUnknownRelation) != tt.unknown {
				t.Errorf("Is(ErrUnknownRelation) = %v, want %v", !tt.unknown, tt.unknown)
			}
			if !reflect.DeepEqual(out, Output{}) {
				t.Errorf("Output = %+v, want zero", out)
			}
			if d.InTransaction() != inTx {
				t.Errorf("a protocol error changed InTransaction to %v", d.InTransaction())
			}
			if !strings.HasPrefix(err.Error(), "decoder: protocol error at 0/16B3748 in ") {
				t.Errorf("Error() = %q", err)
			}
		})
	}
}

func TestProtocolErrorMessage(t *testing.T) {
	d := newDecoder(t, Config{})
	decode(t, d, 1, beginMsg(1, commitAt, 1))
	_, err := d.Decode(0x16B3748, insertMsg(16390, txt("1")))
	const want = "decoder: protocol error at 0/16B3748 in Insert message: unknown relation id 16390"
	if err == nil || err.Error() != want {
		t.Errorf("Error() = %v\nwant     %s", err, want)
	}
	_, err = d.Decode(0x16B3748, []byte("Zz"))
	if want := `decoder: protocol error at 0/16B3748 in message type 'Z': unknown message type`; err == nil || err.Error() != want {
		t.Errorf("Error() = %v\nwant     %s", err, want)
	}
}

// TestTruncatedMessages cuts every valid message at every length: each cut is a protocol error
// (never a panic, never a half-read Output), and so is the message with a byte appended.
func TestTruncatedMessages(t *testing.T) {
	msgs := [][]byte{
		beginMsg(1, commitAt, 1),
		commitMsg(1, 2, commitAt),
		relationMsg(outboxID, "public", "outbox", outboxCols...),
		outboxRow(txt("1"), txt("k"), txt("t"), txt(`{"a": 1}`), txt("E"), txt(`{"h": "v"}`)),
		updateMsg(outboxID, []tv{txt("1"), null}, txt("1"), txt("x")),
		deleteMsg(outboxID, txt("1")),
		truncateMsg(1, 2),
		originMsg(1, "o"),
		typeMsg(1, "public", "t"),
		logicalMsg(true, 1, "outbox", `{"key": "k", "topic": "t", "payload": 1}`),
	}
	for _, m := range msgs {
		for n := 0; n <= len(m); n++ {
			d := newDecoder(t, Config{})
			decode(t, d, 1, relationMsg(outboxID, "public", "outbox", outboxCols...))
			decode(t, d, 1, beginMsg(1, commitAt, 1))
			data := append([]byte(nil), m[:n]...)
			if n == len(m) {
				data = append(data, 0)
			}
			out, err := d.Decode(9, data)
			if !errors.Is(err, ErrProtocol) {
				t.Errorf("%q: err = %v, want ErrProtocol", data, err)
			}
			if !reflect.DeepEqual(out, Output{}) {
				t.Errorf("%q: Output = %+v, want zero", data, out)
			}
		}
	}
}

func TestReset(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	d.Reset()
	if d.InTransaction() {
		t.Fatal("InTransaction after Reset")
	}
	if _, err := d.Decode(5, commitMsg(0x16B3800, 0x16B3830, commitAt)); !errors.Is(err, ErrProtocol) {
		t.Errorf("Commit after Reset: err = %v, want ErrProtocol", err)
	}
	decode(t, d, 5, beginMsg(0x16B3800, commitAt, 777))
	_, err := d.Decode(5, outboxRow(txt("1"), txt("k"), txt("t"), txt("{}"), null, null))
	if !errors.Is(err, ErrUnknownRelation) {
		t.Errorf("Insert after Reset: err = %v, want ErrUnknownRelation (the relation cache is gone)", err)
	}
	// After the reconnect the server announces the relation again.
	decode(t, d, 5, relationMsg(outboxID, "public", "outbox", outboxCols...))
	if out := decode(t, d, 5, outboxRow(txt("1"), txt("k"), txt("t"), txt("{}"), null, null)); out.Kind != KindEvent {
		t.Errorf("Insert after Relation: %+v", out)
	}
}

func TestPgCatalogNamespace(t *testing.T) {
	// The protocol writes pg_catalog as an empty namespace.
	d := newDecoder(t, Config{Topic: "t"})
	decode(t, d, 1, relationMsg(1, "", "outbox", col{"id", oidInt8}, col{"aggregate_id", oidText}, col{"payload", oidText}))
	decode(t, d, 1, beginMsg(1, commitAt, 1))
	if out := decode(t, d, 1, insertMsg(1, txt("1"), txt("k"), txt("p"))); out.Event.Relation != "pg_catalog.outbox" {
		t.Errorf("Relation = %q", out.Event.Relation)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tables := range [][]string{{""}, {".outbox"}, {"public."}, {"public.outbox", ""}} {
		cfg := Config{Tables: tables}
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(Tables %q) = nil, want an error", tables)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("New(Tables %q) = nil error", tables)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	if err := (Config{Tables: []string{"outbox", "a.b"}, Topic: "t", MessagePrefix: "p"}).Validate(); err != nil {
		t.Errorf("valid Config: %v", err)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindNone: "None", KindBegin: "Begin", KindEvent: "Event", KindCommit: "Commit", 17: "Kind(17)"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q, want %q", k, k.String(), want)
		}
	}
}

// TestInsertAllocations pins the hot path: a row without headers costs one allocation (the id and
// key strings), whatever the size of the transaction.
func TestInsertAllocations(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	row := outboxRow(txt("123456"), txt("order-123"), txt("orders"), txt(`{"total": 10}`), txt("OrderPlaced"), null)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := d.Decode(2, row); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Insert: %v allocations, want at most 1", allocs)
	}
}

func BenchmarkDecodeInsert(b *testing.B) {
	d := newDecoder(b, Config{})
	openTx(b, d)
	row := outboxRow(txt("123456789"), txt("order-8f3a2c"), txt("orders.events"),
		txt(`{"order_id": "8f3a2c", "customer": "c-1029", "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}], "total": 129.90}`),
		txt("OrderPlaced"), null)
	benchDecode(b, d, row)
}

func BenchmarkDecodeInsertWithHeaders(b *testing.B) {
	d := newDecoder(b, Config{})
	openTx(b, d)
	row := outboxRow(txt("123456789"), txt("order-8f3a2c"), txt("orders.events"),
		txt(`{"order_id": "8f3a2c", "customer": "c-1029", "total": 129.90}`), txt("OrderPlaced"),
		txt(`{"correlation_id": "c-77", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`))
	benchDecode(b, d, row)
}

// benchDecode decodes row, an Insert of the transaction the caller opened on d, b.N times.
func benchDecode(b *testing.B, d *Decoder, row []byte) {
	b.SetBytes(int64(len(row)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(2, row); err != nil {
			b.Fatal(err)
		}
	}
}

// The relay gives a large payload's buffer back to the stream once Kafka has taken the record,
// and the stream copies the next payload into it: everything of a message but the event's
// Payload must be the decoder's own by then. Every buffer here is overwritten once decoded;
// the relation cache, the interned topic and event type, the id, key and headers stay, and
// the Payload is the message's own bytes (not a copy: the record's value is not copied either).
func TestDecodeKeepsNothingOfDataButThePayload(t *testing.T) {
	garbage := func(b []byte) {
		for i := range b {
			b[i] = 0xEE
		}
	}
	d := newDecoder(t, Config{})
	for _, m := range [][]byte{relationMsg(outboxID, "public", "outbox", outboxCols...), beginMsg(0x16B3800, commitAt, 777)} {
		decode(t, d, 0x16B3700, m)
		garbage(m)
	}
	want := outbox.Event{ID: "42", AggregateID: "order-1", Topic: "orders", EventType: "OrderPlaced",
		Headers: []outbox.Header{{Key: "correlation_id", Value: []byte("c-1")}}, Relation: "public.outbox"}
	for i := range 2 { // the second row meets the interned topic and event type of the first
		row := outboxRow(txt("42"), txt("order-1"), txt("orders"), txt(`{"total": 10}`), txt("OrderPlaced"), txt(`{"correlation_id": "c-1"}`))
		out := decode(t, d, 0x16B3748, row)
		if string(out.Event.Payload) != `{"total": 10}` {
			t.Fatalf("row %d: Payload = %q", i, out.Event.Payload)
		}
		garbage(row)
		if got := out.Event.Payload; len(got) == 0 || got[0] != 0xEE {
			t.Errorf("row %d: Payload %q is a copy, want the message's own bytes", i, got)
		}
		out.Event.Payload = nil
		if !reflect.DeepEqual(out.Event, want) {
			t.Errorf("row %d: with the message overwritten, Event = %+v\nwant %+v", i, out.Event, want)
		}
	}
	msg := logicalMsg(true, 0x16B3790, defaultMessagePrefix, `{"id": "m-1", "key": "k", "topic": "t", "event_type": "E", "headers": {"h": "v"}, "payload": {"a": 1}}`)
	out := decode(t, d, 0x16B3790, msg)
	garbage(msg)
	wantMsg := outbox.Event{ID: "m-1", AggregateID: "k", Topic: "t", Payload: []byte(`{"a": 1}`), EventType: "E",
		Headers: []outbox.Header{{Key: "h", Value: []byte("v")}}, Relation: "message:" + defaultMessagePrefix}
	if !reflect.DeepEqual(out.Event, wantMsg) {
		t.Errorf("logical message, overwritten: Event = %+v\nwant %+v", out.Event, wantMsg)
	}
}
