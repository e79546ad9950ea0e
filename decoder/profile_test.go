package decoder

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// debeziumCols is Debezium's default outbox table.
var debeziumCols = []col{{"id", oidText}, {"aggregatetype", oidText}, {"aggregateid", oidText}, {"type", oidText}, {"payload", oidJSONB}}

func debeziumConfig() Config {
	p := outbox.Debezium
	cfg := Config{Columns: p.Columns, TopicTemplate: p.TopicTemplate, IDHeader: p.IDHeader}
	if p.NullPayloadTombstone {
		cfg.NullPayload = outbox.NullPayloadTombstone
	}
	return cfg
}

func TestDebeziumProfileEventsAreEventRoutersRecords(t *testing.T) {
	d := newDecoder(t, debeziumConfig())
	decode(t, d, 0x100, relationMsg(outboxID, "public", "outbox", debeziumCols...))
	decode(t, d, 0x100, beginMsg(0x200, commitAt, 9))
	const id = "5b2a0c44-7e1f-4c55-9d4e-0e0b7b9c1f00"
	out := decode(t, d, 0x110, insertMsg(outboxID, txt(id), txt("Order"), txt("ü-1"), txt("OrderCreated"), txt(`{"a": 1}`)))
	want := outbox.Event{ID: id, AggregateID: "ü-1", Topic: "outbox.event.Order", Payload: []byte(`{"a": 1}`),
		EventType: "OrderCreated", Relation: "public.outbox", Headers: []outbox.Header{{Key: "id", Value: []byte(id)}}}
	if !reflect.DeepEqual(out.Event, want) {
		t.Fatalf("event = %+v\nwant    %+v", out.Event, want)
	}

	// A NULL payload is a tombstone, as EventRouter's null value through a String converter.
	out, err := d.Decode(0x120, insertMsg(outboxID, txt(id), txt("Customer"), txt("k"), null, null))
	if err != nil {
		t.Fatalf("NULL payload: %v, want a tombstone", err)
	}
	if out.Event.Payload != nil || out.Event.Topic != "outbox.event.Customer" || out.Event.AggregateID != "k" {
		t.Fatalf("NULL payload event = %+v, want a nil payload on outbox.event.Customer keyed k", out.Event)
	}
}

func TestTopicTemplateBadRows(t *testing.T) {
	cfg := debeziumConfig()
	cfg.TopicTemplate = "${aggregatetype}.${type}"
	d := newDecoder(t, cfg)
	decode(t, d, 0x100, relationMsg(outboxID, "public", "outbox", debeziumCols...))
	decode(t, d, 0x100, beginMsg(0x200, commitAt, 9))
	out := decode(t, d, 0x110, insertMsg(outboxID, txt("1"), txt("A"), txt("k"), txt("T"), txt(`{}`)))
	if out.Event.Topic != "A.T" {
		t.Fatalf("topic = %q, want A.T", out.Event.Topic)
	}
	for _, c := range []struct {
		name    string
		at, typ tv
		col     string
		want    error
	}{
		{"null", null, txt("T"), "aggregatetype", outbox.ErrNullTopic},
		{"empty", txt("A"), txt(""), "type", outbox.ErrEmptyTopic},
		{"binary", bin("A"), txt("T"), "aggregatetype", outbox.ErrBinaryValue},
	} {
		_, err := d.Decode(0x120, insertMsg(outboxID, txt("1"), c.at, txt("k"), c.typ, txt(`{}`)))
		var re *outbox.RowError
		if !errors.As(err, &re) || re.Column != c.col || !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want a RowError of column %s wrapping %v", c.name, err, c.col, c.want)
		}
	}

	// A table without a placeholder's column: every row is a bad row naming it.
	decode(t, d, 0x130, relationMsg(outboxID, "public", "outbox", col{"id", oidText}, col{"aggregatetype", oidText},
		col{"aggregateid", oidText}, col{"payload", oidJSONB}))
	_, err := d.Decode(0x140, insertMsg(outboxID, txt("1"), txt("A"), txt("k"), txt(`{}`)))
	var re *outbox.RowError
	if !errors.As(err, &re) || re.Column != "type" || !errors.Is(err, outbox.ErrMissingColumn) {
		t.Errorf("missing column: err = %v, want a RowError of column type wrapping ErrMissingColumn", err)
	}
}

func TestNullPayloadStaysABadRowWithoutTheProfile(t *testing.T) {
	cfg := debeziumConfig()
	cfg.NullPayload = outbox.NullPayloadDeadLetter
	d := newDecoder(t, cfg)
	decode(t, d, 0x100, relationMsg(outboxID, "public", "outbox", debeziumCols...))
	decode(t, d, 0x100, beginMsg(0x200, commitAt, 9))
	if _, err := d.Decode(0x120, insertMsg(outboxID, txt("1"), txt("A"), txt("k"), null, null)); !errors.Is(err, outbox.ErrNullPayload) {
		t.Fatalf("err = %v, want ErrNullPayload", err)
	}
}

func TestIDHeaderBesideARowHeaderOfTheSameNameIsABadRow(t *testing.T) {
	d := newDecoder(t, Config{IDHeader: "id"})
	openTx(t, d)
	_, err := d.Decode(0x120, outboxRow(txt("7"), txt("k"), txt("t"), txt(`{}`), null, txt(`{"ID": "x", "b": "y"}`)))
	if !errors.Is(err, outbox.ErrReservedHeader) {
		t.Fatalf("err = %v, want ErrReservedHeader", err)
	}
	out := decode(t, d, 0x130, outboxRow(txt("7"), txt("k"), txt("t"), txt(`{}`), null, txt(`{"a": "x", "z": "y"}`)))
	want := []outbox.Header{{Key: "a", Value: []byte("x")}, {Key: "id", Value: []byte("7")}, {Key: "z", Value: []byte("y")}}
	if !reflect.DeepEqual(out.Event.Headers, want) {
		t.Fatalf("headers = %q, want %q (sorted by key)", out.Event.Headers, want)
	}
}

func TestProfileConfigRefusesWhatCannotWork(t *testing.T) {
	for _, c := range []Config{
		{TopicTemplate: "a.${b}", Topic: "t"},
		{TopicTemplate: "no-placeholder"},
		{TopicTemplate: "a.${b"},
		{TopicTemplate: "a.${}"},
		{IDHeader: "outbox-id"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", c)
		}
	}
}
