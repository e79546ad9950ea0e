package decoder

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// value is one column of a TupleData: its kind ('t', 'b', 'n' or 'u') and, for 't' and 'b', its
// bytes, aliasing the message.
type value struct {
	kind byte
	data []byte
}

// tuple reads a TupleData (Int16 column count, then per column Byte1 kind and, for 't' and 'b',
// Int32 length and the bytes) into d.vals, which is reused from row to row.
func (d *Decoder) tuple(r *reader) ([]value, bool) {
	n := int(r.u16())
	if r.bad || n > len(r.buf) { // every column takes at least its kind byte
		return nil, false
	}
	if cap(d.vals) < n {
		d.vals = make([]value, n)
	}
	vals := d.vals[:n]
	for i := range vals {
		switch k := r.u8(); k {
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			vals[i] = value{kind: k, data: r.bytes(r.u32())}
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
			vals[i] = value{kind: k}
		default:
			clear(vals)
			return nil, false
		}
		if r.bad {
			clear(vals)
			return nil, false
		}
	}
	return vals, true
}

// skipTuple checks the framing of a TupleData the relay does not use.
func (d *Decoder) skipTuple(r *reader) bool {
	vals, ok := d.tuple(r)
	clear(vals)
	return ok
}

// insertMessage handles 'I': Int32 relation id, 'N', TupleData.
func (d *Decoder) insertMessage(walStart pglogrepl.LSN, r *reader) (Output, error) {
	relID := r.u32()
	ok := r.u8() == 'N'
	var vals []value
	if ok {
		vals, ok = d.tuple(r)
	}
	defer clear(vals) // drop the references to data
	if !ok || !r.done() {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeInsert, errTruncated)
	}
	if !d.inTx {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeInsert, errors.New("Insert outside a transaction")) //nolint:staticcheck // ST1005: starts with the pgoutput message's name
	}
	rel := d.rels[relID]
	if rel == nil {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeInsert, fmt.Errorf("%w %d", ErrUnknownRelation, relID))
	}
	if len(vals) != rel.ncols {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeInsert,
			fmt.Errorf("tuple has %d columns, relation %s (id %d) has %d", len(vals), rel.name, relID, rel.ncols))
	}
	if !rel.selected {
		return Output{}, nil
	}
	out := d.txOutput(KindEvent)
	ev := &out.Event
	ev.Relation = rel.name

	// Each role in turn; the first problem is the one reported, the rest of the row is still read.
	var bad problem
	id, idOK := d.text(vals, rel, roleID, outbox.ErrNullID, &bad)
	if idOK && len(id) == 0 {
		bad.set(d.names[roleID], outbox.ErrNullID)
	}
	key, keyOK := d.text(vals, rel, roleKey, outbox.ErrNullKey, &bad)
	if keyOK && len(key) == 0 {
		bad.set(d.names[roleKey], outbox.ErrEmptyKey)
	}
	ev.ID, ev.AggregateID = d.idAndKey(id, key)
	if d.topic != "" {
		ev.Topic = d.topic
	} else if d.prof.tmpl != nil {
		ev.Topic = d.templateTopic(vals, rel, &bad)
	} else if topic, ok := d.text(vals, rel, roleTopic, outbox.ErrNullTopic, &bad); ok {
		if len(topic) == 0 {
			bad.set(d.names[roleTopic], outbox.ErrEmptyTopic)
		}
		ev.Topic = d.lastTopic.string(topic)
	}
	d.payload(vals, rel, ev, &bad)
	if et, ok := d.text(vals, rel, roleEventType, nil, &bad); ok {
		ev.EventType = d.lastEvType.string(et)
	}
	if h, ok := d.text(vals, rel, roleHeaders, nil, &bad); ok {
		hs, err := outbox.ParseHeaders(h)
		if err != nil {
			bad.set(d.names[roleHeaders], err)
		}
		ev.Headers = hs
	}
	d.prof.addIDHeader(ev, d.names[roleHeaders], &bad)
	if bad.err != nil {
		return out, &outbox.RowError{LSN: walStart, Relation: rel.name, Column: bad.col, ID: ev.ID, Err: bad.err}
	}
	return out, nil
}

// text returns the text of role's column. A missing column, a binary value, and (when nullErr is
// not nil, for required columns) NULL or unchanged TOAST are recorded in bad.
func (d *Decoder) text(vals []value, rel *relation, role int, nullErr error, bad *problem) ([]byte, bool) {
	i := rel.col[role]
	if i < 0 {
		if nullErr != nil {
			bad.set(d.names[role], outbox.ErrMissingColumn)
		}
		return nil, false
	}
	switch v := vals[i]; v.kind {
	case pglogrepl.TupleDataTypeText:
		return v.data, true
	case pglogrepl.TupleDataTypeBinary:
		bad.set(d.names[role], outbox.ErrBinaryValue)
	default: // NULL, or unchanged TOAST which an Insert never has
		if nullErr != nil {
			bad.set(d.names[role], nullErr)
		}
	}
	return nil, false
}

// idAndKey makes the id and key strings with one allocation.
func (d *Decoder) idAndKey(id, key []byte) (string, string) {
	d.buf = append(append(d.buf[:0], id...), key...)
	s := string(d.buf)
	return s[:len(id)], s[len(id):]
}

// problem is the first thing wrong with a row.
type problem struct {
	col string
	err error
}

func (p *problem) set(col string, err error) {
	if p.err == nil {
		p.col, p.err = col, err
	}
}

// interned remembers the last string made, so that a column with few distinct values (topic,
// event type) costs no allocation per row.
type interned struct{ s string }

func (c *interned) string(b []byte) string {
	if c.s != string(b) {
		c.s = string(b)
	}
	return c.s
}
