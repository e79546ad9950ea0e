package decoder

import (
	"bytes"
	"errors"
	"github.com/cdc-relay/cdc-relay/outbox"
	"testing"
)

// fuzzSeeds are valid messages of every kind; the committed corpus in testdata/fuzz/FuzzDecode
// holds the same ones.
func fuzzSeeds() [][]byte {
	return [][]byte{
		beginMsg(0x16B3800, commitAt, 777),
		commitMsg(0x16B3800, 0x16B3830, commitAt),
		relationMsg(outboxID, "public", "outbox", outboxCols...),
		outboxRow(txt("42"), txt("order-1"), txt("orders"), txt(`{"total": 10}`), txt("OrderPlaced"), txt(`{"traceparent": "00-abc-01", "n": 1}`)),
		outboxRow(txt("43"), null, txt("orders"), bin("\x01{}"), null, toast),
		updateMsg(outboxID, []tv{txt("1"), null}, txt("1"), txt("x")),
		deleteMsg(outboxID, txt("1")),
		truncateMsg(outboxID, 16390),
		originMsg(0x10, "upstream"),
		typeMsg(16400, "public", "mood"),
		logicalMsg(true, 0x16B3748, "outbox", `{"id": "e1", "key": "k", "topic": "t", "event_type": "E", "headers": {"a": "b"}, "payload": {"x": [1, 2]}}`),
		logicalMsg(false, 0x16B3748, "outbox", `{"key": "k"}`),
		byteaRow(txt(`\x0a0568656c6c6f1000ff80fe00`)),
		byteaRow(txt(`\012\005hello\020\000\377\\`)),
		byteaRow(txt(`\x0`)),
		byteaRow(null),
	}
}

// FuzzDecode feeds arbitrary bytes to a decoder that knows the outbox relation and one with a
// bytea payload, outside and inside a transaction. Decode must not panic, must classify every error, and must leave the
// decoder usable.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, inTx := range []bool{false, true} {
			d := newDecoder(t, Config{})
			decode(t, d, 1, relationMsg(outboxID, "public", "outbox", outboxCols...))
			decode(t, d, 1, relationMsg(byteaRelID, "public", "outbox_bytes", byteaCols...))
			if inTx {
				decode(t, d, 1, beginMsg(0x16B3800, commitAt, 777))
			}
			out, err := d.Decode(0x16B3748, bytes.Clone(data))
			var re *outbox.RowError
			switch {
			case errors.As(err, &re):
				if out.Kind != KindEvent && out.Kind != KindNone {
					t.Fatalf("bad row with Kind %v", out.Kind)
				}
				if re.LSN != 0x16B3748 || re.Relation == "" || re.Err == nil || errors.Is(err, ErrProtocol) {
					t.Fatalf("outbox.RowError = %+v", re)
				}
				_ = re.Error()
			case err != nil:
				var pe *ProtocolError
				if !errors.As(err, &pe) || !errors.Is(err, ErrProtocol) {
					t.Fatalf("error %v is neither a outbox.RowError nor a ProtocolError", err)
				}
				if out.Kind != KindNone || out.Event.Relation != "" {
					t.Fatalf("protocol error with Output %+v", out)
				}
				_ = pe.Error()
			case out.Kind == KindEvent:
				ev := out.Event
				if ev.ID == "" || ev.AggregateID == "" || ev.Topic == "" || ev.Payload == nil || ev.Relation == "" {
					t.Fatalf("incomplete event without error: %+v", ev)
				}
				if !d.InTransaction() {
					t.Fatal("event outside a transaction")
				}
			case out.Kind > KindCommit:
				t.Fatalf("Kind %v", out.Kind)
			}

			// Whatever happened, a well-formed transaction still decodes.
			decode(t, d, 2, relationMsg(1, "public", "outbox", outboxCols...))
			decode(t, d, 2, beginMsg(0x16B3900, commitAt, 778))
			ev := decode(t, d, 3, insertMsg(1, txt("1"), txt("k"), txt("t"), txt("{}"), txt("now"), null, null, null))
			if ev.Kind != KindEvent || ev.Xid != 778 {
				t.Fatalf("after fuzz input: %+v", ev)
			}
			if c := decode(t, d, 4, commitMsg(0x16B3900, 0x16B3930, commitAt)); c.Kind != KindCommit {
				t.Fatalf("after fuzz input: %+v", c)
			}
		}
	})
}
