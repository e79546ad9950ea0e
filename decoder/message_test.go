package decoder

import (
	"errors"
	"github.com/cdc-relay/cdc-relay/outbox"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestLogicalMessage(t *testing.T) {
	d := newDecoder(t, Config{})
	decode(t, d, 1, beginMsg(0x16B3800, commitAt, 777))
	// The payload's raw JSON text is the record value: spacing, key order and number text kept.
	content := `{"id": "evt-1", "key": "order-1", "topic": "orders", "event_type": "OrderPlaced",
		"headers": {"traceparent": "00-abc-01", "retry": 2},
		"payload": {"b": 1, "a": [1.50, "x"]}}`
	out := decode(t, d, 0x16B3748, logicalMsg(true, 0x16B3748, "outbox", content))
	want := Output{Kind: KindEvent, Xid: 777, CommitLSN: 0x16B3800, CommitTime: commitAt, Event: outbox.Event{
		ID: "evt-1", AggregateID: "order-1", Topic: "orders", Payload: []byte(`{"b": 1, "a": [1.50, "x"]}`),
		EventType: "OrderPlaced", Headers: []outbox.Header{{Key: "retry", Value: []byte("2")}, {Key: "traceparent", Value: []byte("00-abc-01")}},
		Relation: "message:outbox",
	}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("Output = %+v\nwant %+v", out, want)
	}
	out = decode(t, d, 0x16B3800, commitMsg(0x16B3800, 0x16B3830, commitAt))
	if out.Kind != KindCommit || out.EndLSN != 0x16B3830 {
		t.Errorf("Commit = %+v", out)
	}
}

func TestLogicalMessageFields(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		content string
		want    outbox.Event
	}{
		{"minimal: id from the message LSN", Config{}, `{"key": "k", "topic": "t", "payload": 1}`,
			outbox.Event{ID: "0/16B3748", AggregateID: "k", Topic: "t", Payload: []byte("1"), Relation: "message:outbox"}},
		{"empty id: the message LSN", Config{}, `{"id": "", "key": "k", "topic": "t", "payload": "s"}`,
			outbox.Event{ID: "0/16B3748", AggregateID: "k", Topic: "t", Payload: []byte(`"s"`), Relation: "message:outbox"}},
		{"numeric id", Config{}, `{"id": 42, "key": "k", "topic": "t", "payload": [true]}`,
			outbox.Event{ID: "42", AggregateID: "k", Topic: "t", Payload: []byte("[true]"), Relation: "message:outbox"}},
		{"null payload is the JSON text null", Config{}, `{"key": "k", "topic": "t", "payload": null}`,
			outbox.Event{ID: "0/16B3748", AggregateID: "k", Topic: "t", Payload: []byte("null"), Relation: "message:outbox"}},
		{"null optional fields", Config{}, `{"key": "k", "topic": "t", "payload": {}, "event_type": null, "headers": null, "id": null}`,
			outbox.Event{ID: "0/16B3748", AggregateID: "k", Topic: "t", Payload: []byte("{}"), Relation: "message:outbox"}},
		{"Config.Topic wins", Config{Topic: "fixed"}, `{"key": "k", "topic": "t", "payload": 1}`,
			outbox.Event{ID: "0/16B3748", AggregateID: "k", Topic: "fixed", Payload: []byte("1"), Relation: "message:outbox"}},
		{"Config.Topic, no topic", Config{Topic: "fixed"}, `{"key": "k", "payload": 1}`,
			outbox.Event{ID: "0/16B3748", AggregateID: "k", Topic: "fixed", Payload: []byte("1"), Relation: "message:outbox"}},
		{"custom prefix", Config{MessagePrefix: "events"}, `{"key": "k", "topic": "t", "payload": 1, "extra": "ignored"}`,
			outbox.Event{ID: "0/16B3748", AggregateID: "k", Topic: "t", Payload: []byte("1"), Relation: "message:events"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, tt.cfg)
			decode(t, d, 1, beginMsg(0x16B3800, commitAt, 777))
			prefix := tt.cfg.MessagePrefix
			if prefix == "" {
				prefix = "outbox"
			}
			out := decode(t, d, 0x16B3748, logicalMsg(true, 0x16B3748, prefix, tt.content))
			if out.Kind != KindEvent || !reflect.DeepEqual(out.Event, tt.want) {
				t.Errorf("Output = %+v\nwant Event %+v", out, tt.want)
			}
		})
	}
}

func TestBadLogicalMessages(t *testing.T) {
	const lsn = pglogrepl.LSN(0x16B3748)
	tests := []struct {
		name     string
		content  string
		sentinel error
		column   string
		id       string
		payload  string
	}{
		{"not JSON", `{"key": `, outbox.ErrBadMessage, "", "0/16B3748", `{"key": `},
		{"not an object", `[1, 2]`, outbox.ErrBadMessage, "", "0/16B3748", `[1, 2]`},
		{"empty content", ``, outbox.ErrBadMessage, "", "0/16B3748", ``},
		{"no key", `{"id": "e1", "topic": "t", "payload": 1}`, outbox.ErrNullKey, "key", "e1", "1"},
		{"null key", `{"id": "e1", "key": null, "topic": "t", "payload": 1}`, outbox.ErrNullKey, "key", "e1", "1"},
		{"empty key", `{"id": "e1", "key": "", "topic": "t", "payload": 1}`, outbox.ErrEmptyKey, "key", "e1", "1"},
		{"numeric key", `{"id": "e1", "key": 5, "topic": "t", "payload": 1}`, outbox.ErrBadMessage, "key", "e1", "1"},
		{"no topic", `{"id": "e1", "key": "k", "payload": 1}`, outbox.ErrNullTopic, "topic", "e1", "1"},
		{"empty topic", `{"id": "e1", "key": "k", "topic": "", "payload": 1}`, outbox.ErrEmptyTopic, "topic", "e1", "1"},
		{"object topic", `{"id": "e1", "key": "k", "topic": {}, "payload": 1}`, outbox.ErrBadMessage, "topic", "e1", "1"},
		{"no payload", `{"id": "e1", "key": "k", "topic": "t"}`, outbox.ErrNullPayload, "payload", "e1", ""},
		{"bad id", `{"id": [1], "key": "k", "topic": "t", "payload": 1}`, outbox.ErrBadMessage, "id", "0/16B3748", "1"},
		{"bad event_type", `{"id": "e1", "key": "k", "topic": "t", "payload": 1, "event_type": 3}`, outbox.ErrBadMessage, "event_type", "e1", "1"},
		{"headers not an object", `{"id": "e1", "key": "k", "topic": "t", "payload": 1, "headers": ["a"]}`, outbox.ErrBadHeaders, "headers", "e1", "1"},
		{"reserved header", `{"id": "e1", "key": "k", "topic": "t", "payload": 1, "headers": {"outbox-id": "e2"}}`, outbox.ErrReservedHeader, "headers", "e1", "1"},
		{"reserved dlq header", `{"id": "e1", "key": "k", "topic": "t", "payload": 1, "headers": {"dlq-error": "no"}}`, outbox.ErrReservedHeader, "headers", "e1", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{})
			decode(t, d, 1, beginMsg(0x16B3800, commitAt, 777))
			out, err := d.Decode(lsn, logicalMsg(true, lsn, "outbox", tt.content))
			if !errors.Is(err, tt.sentinel) || !outbox.IsBadRow(err) {
				t.Fatalf("err = %v, want a bad row for %v", err, tt.sentinel)
			}
			var re *outbox.RowError
			errors.As(err, &re)
			if re.LSN != lsn || re.Relation != "message:outbox" || re.Column != tt.column || re.ID != tt.id {
				t.Errorf("outbox.RowError = %+v", re)
			}
			if out.Kind != KindEvent || out.Xid != 777 || out.CommitLSN != 0x16B3800 ||
				out.Event.ID != tt.id || out.Event.Relation != "message:outbox" || string(out.Event.Payload) != tt.payload {
				t.Errorf("Output = %+v", out)
			}
			if !d.InTransaction() {
				t.Error("a bad message ended the transaction")
			}
		})
	}
}

func TestNonTransactionalMessage(t *testing.T) {
	d := newDecoder(t, Config{})
	out, err := d.Decode(0x16B3748, logicalMsg(false, 0x16B3748, "outbox", `{"id": "e1", "key": "k", "topic": "t", "payload": 1}`))
	if !errors.Is(err, outbox.ErrBadMessage) || !outbox.IsBadRow(err) {
		t.Fatalf("err = %v, want a bad row for outbox.ErrBadMessage", err)
	}
	if !strings.Contains(err.Error(), "pg_logical_emit_message(true, ...)") {
		t.Errorf("Error() = %q, want it to say how to emit the message", err)
	}
	// Where it is comes along, so that the relay can dead-letter it and confirm past it.
	want := Output{Kind: KindNone, EndLSN: 0x16B3748, Event: outbox.Event{ID: "e1", AggregateID: "k", Topic: "t", Payload: []byte("1"), Relation: "message:outbox"}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("Output = %+v\nwant %+v", out, want)
	}
	if d.InTransaction() {
		t.Error("InTransaction after a non-transactional message")
	}
	// Inside a transaction it is refused just the same, and the transaction goes on.
	decode(t, d, 1, beginMsg(0x16B3800, commitAt, 777))
	out, err = d.Decode(0x16B3748, logicalMsg(false, 0x16B3748, "outbox", `not json`))
	if !errors.Is(err, outbox.ErrBadMessage) || out.Kind != KindNone || string(out.Event.Payload) != "not json" {
		t.Errorf("Output = %+v, err = %v", out, err)
	}
	if !d.InTransaction() {
		t.Error("a non-transactional message ended the transaction")
	}
}

func TestLogicalMessageInterleavedWithRows(t *testing.T) {
	d := newDecoder(t, Config{})
	openTx(t, d)
	var kinds []Kind
	for _, m := range [][]byte{
		outboxRow(txt("1"), txt("k"), txt("t"), txt("{}"), null, null),
		logicalMsg(true, 0x16B3760, "outbox", `{"key": "k", "topic": "t", "payload": 2}`),
		logicalMsg(true, 0x16B3770, "other", `{}`),
		outboxRow(txt("2"), txt("k"), txt("t"), txt("{}"), null, null),
		commitMsg(0x16B3800, 0x16B3830, commitAt),
	} {
		kinds = append(kinds, decode(t, d, 5, m).Kind)
	}
	if want := []Kind{KindEvent, KindEvent, KindNone, KindEvent, KindCommit}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds = %v, want %v", kinds, want)
	}
}
