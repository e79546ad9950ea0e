package decoder

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// byteaRelID is an outbox table whose payload column is bytea.
const byteaRelID = 16390

var byteaCols = []col{{"id", oidInt8}, {"aggregate_id", oidText}, {"topic", oidText}, {"payload", outbox.OIDBytea}}

// protoBytes are protobuf bytes with 0x00 and bytes that are not UTF-8.
var protoBytes = []byte{0x0a, 0x05, 'h', 'e', 'l', 'l', 'o', 0x10, 0x00, 0xff, 0x80, 0xfe, 0x00}

func byteaRow(payload tv) []byte { return insertMsg(byteaRelID, txt("7"), txt("k"), txt("t"), payload) }

func decodeRow(t *testing.T, cfg Config, relMsg, row []byte) (outbox.Event, error) {
	t.Helper()
	d := newDecoder(t, cfg)
	decode(t, d, 1, relMsg)
	decode(t, d, 2, beginMsg(0x16B3800, commitAt, 777))
	out, err := d.Decode(3, row)
	if out.Kind != KindEvent {
		t.Fatalf("Kind = %v, want Event (err %v)", out.Kind, err)
	}
	return out.Event, err
}

func TestByteaPayloadIsItsBytes(t *testing.T) {
	rel := relationMsg(byteaRelID, "public", "outbox_bytes", byteaCols...)
	for name, text := range map[string]string{
		"hex":    `\x0a0568656c6c6f1000ff80fe00`,
		"HEX":    `\x0A0568656C6C6F1000FF80FE00`,
		"escape": `\012\005hello\020\000\377\200\376\000`,
	} {
		ev, err := decodeRow(t, Config{}, rel, byteaRow(txt(text)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(ev.Payload, protoBytes) || !ev.Binary {
			t.Errorf("%s: Payload = %x (binary %v), want %x", name, ev.Payload, ev.Binary, protoBytes)
		}
	}
	ev, err := decodeRow(t, Config{}, rel, byteaRow(txt(`a\\b`)))
	if err != nil || string(ev.Payload) != `a\b` {
		t.Errorf("escaped backslash: %q, %v", ev.Payload, err)
	}
	for _, text := range []string{``, `\x`} {
		ev, err := decodeRow(t, Config{}, rel, byteaRow(txt(text)))
		if err != nil || ev.Payload == nil || len(ev.Payload) != 0 {
			t.Errorf("empty bytea %q: Payload = %#v, %v; want empty and not nil", text, ev.Payload, err)
		}
	}
	for _, text := range []string{`\x0`, `\xzz`, `\9`, `a\`} {
		ev, err := decodeRow(t, Config{}, rel, byteaRow(txt(text)))
		var re *outbox.RowError
		if !errors.As(err, &re) || !errors.Is(err, outbox.ErrBadBytea) || re.Column != "payload" || string(ev.Payload) != text {
			t.Errorf("bytea text %q: err %v, Payload %q; want a bad row carrying the text", text, err, ev.Payload)
		}
	}
}

func TestTextPayloadStaysText(t *testing.T) {
	rel := relationMsg(outboxID, "public", "outbox", outboxCols...)
	ev, err := decodeRow(t, Config{}, rel, outboxRow(txt("1"), txt("k"), txt("t"), txt(`\x00`), null, null))
	if err != nil || string(ev.Payload) != `\x00` || ev.Binary {
		t.Errorf("jsonb payload: %q binary %v, %v", ev.Payload, ev.Binary, err)
	}
	ev, err = decodeRow(t, Config{}, rel, outboxRow(txt("1"), txt("k"), txt("t"), txt(""), null, null))
	if err != nil || ev.Payload == nil || len(ev.Payload) != 0 {
		t.Errorf("empty text payload: %#v, %v; want empty and not nil", ev.Payload, err)
	}
}

func TestNullPayloadIsABadRowOrATombstone(t *testing.T) {
	rel := relationMsg(outboxID, "public", "outbox", outboxCols...)
	row := outboxRow(txt("1"), txt("k"), txt("t"), null, null, null)
	if _, err := decodeRow(t, Config{}, rel, row); !errors.Is(err, outbox.ErrNullPayload) {
		t.Errorf("default: err = %v, want ErrNullPayload", err)
	}
	if _, err := decodeRow(t, Config{NullPayload: outbox.NullPayloadDeadLetter}, rel, row); !errors.Is(err, outbox.ErrNullPayload) {
		t.Errorf("dead-letter: err = %v, want ErrNullPayload", err)
	}
	ev, err := decodeRow(t, Config{NullPayload: outbox.NullPayloadTombstone}, rel, row)
	if err != nil || ev.Payload != nil || ev.AggregateID != "k" {
		t.Errorf("tombstone: %+v, %v; want a nil payload and no error", ev, err)
	}
	ev, err = decodeRow(t, Config{NullPayload: outbox.NullPayloadTombstone}, relationMsg(byteaRelID, "public", "outbox_bytes", byteaCols...), byteaRow(null))
	if err != nil || ev.Payload != nil {
		t.Errorf("bytea tombstone: %+v, %v", ev, err)
	}
	// A missing payload column is still a bad row.
	ev, err = decodeRow(t, Config{NullPayload: outbox.NullPayloadTombstone}, relationMsg(9, "public", "o", outboxCols[:3]...),
		insertMsg(9, txt("1"), txt("k"), txt("t")))
	if !errors.Is(err, outbox.ErrMissingColumn) {
		t.Errorf("missing column with tombstones: %+v, %v", ev, err)
	}
}

func TestDecodeByteaAllocatesOnce(t *testing.T) {
	text := []byte(`\x` + string(bytes.Repeat([]byte("ff00"), 4096)))
	n := testing.AllocsPerRun(100, func() {
		if _, err := outbox.DecodeBytea(nil, text); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Errorf("%v allocations per value, want 1", n)
	}
}
