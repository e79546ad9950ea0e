package decoder

import (
	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// payload sets ev.Payload from the payload column: a bytea column's bytes (its text output,
// hex, decoded), another column's text as it arrived. An empty value stays non-nil, a NULL one
// is a tombstone (nil) when configured, else a bad row, as are a missing column and a binary
// value. A bytea text that does not decode is a bad row whose dead letter carries the text.
func (d *Decoder) payload(vals []value, rel *relation, ev *outbox.Event, bad *problem) {
	name := d.names[rolePayload]
	i := rel.col[rolePayload]
	if i < 0 {
		bad.set(name, outbox.ErrMissingColumn)
		return
	}
	switch v := vals[i]; v.kind {
	case pglogrepl.TupleDataTypeText:
		if !rel.binary {
			ev.Payload = v.data
			if ev.Payload == nil {
				ev.Payload = []byte{}
			}
			return
		}
		b, err := outbox.DecodeBytea(nil, v.data)
		if err != nil {
			bad.set(name, err)
			ev.Payload = v.data
			return
		}
		ev.Payload, ev.Binary = b, true
	case pglogrepl.TupleDataTypeBinary:
		bad.set(name, outbox.ErrBinaryValue)
	case pglogrepl.TupleDataTypeNull:
		if !d.tombstones {
			bad.set(name, outbox.ErrNullPayload)
		}
		ev.Binary = rel.binary
	default: // unchanged TOAST, which an Insert never has
		bad.set(name, outbox.ErrNullPayload)
	}
}
