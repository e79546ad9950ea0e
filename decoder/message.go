package decoder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// messageContent is the documented content of an outbox logical message:
//
//	{"id": "optional", "key": "aggregate id", "topic": "unless Config.Topic",
//	 "event_type": "optional", "headers": {"k": "v"}, "payload": <any JSON value>}
//
// Every field is kept raw so that absent, null and wrongly typed fields can be told apart.
type messageContent struct {
	ID        json.RawMessage `json:"id"`
	Key       json.RawMessage `json:"key"`
	Topic     json.RawMessage `json:"topic"`
	EventType json.RawMessage `json:"event_type"`
	Headers   json.RawMessage `json:"headers"`
	Payload   json.RawMessage `json:"payload"`
}

var errNonTransactional = fmt.Errorf("%w: it was emitted non-transactionally; use pg_logical_emit_message(true, ...) so that it is published only if its transaction commits", outbox.ErrBadMessage)

// logicalMessage handles 'M': Int8 flags (1: transactional), Int64 LSN, String prefix, Int32
// content length, content.
func (d *Decoder) logicalMessage(walStart pglogrepl.LSN, r *reader) (Output, error) {
	flags := r.u8()
	lsn := pglogrepl.LSN(r.u64())
	prefix := r.cstring()
	content := r.bytes(r.u32())
	if !r.done() {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeMessage, errTruncated)
	}
	if d.noMsgs || string(prefix) != d.prefix {
		return Output{}, nil
	}
	transactional := flags&1 != 0
	if transactional && !d.inTx {
		return Output{}, protocolError(walStart, pglogrepl.MessageTypeMessage, errors.New("transactional message outside a transaction"))
	}
	var out Output
	if transactional {
		out = d.txOutput(KindEvent)
	}
	col, err := d.messageEvent(&out.Event, lsn, content)
	if !transactional {
		// Published at once even if its transaction rolls back: refuse it, but keep what was
		// read, and where it is, so that it can be dead-lettered.
		col, err = "", errNonTransactional
		out.EndLSN = lsn
	}
	if err != nil {
		return out, &outbox.RowError{LSN: walStart, Relation: d.msgRelation, Column: col, ID: out.Event.ID, Err: err}
	}
	return out, nil
}

// messageEvent fills ev from a message's content and returns the first problem: the field at
// fault and the reason.
func (d *Decoder) messageEvent(ev *outbox.Event, lsn pglogrepl.LSN, content []byte) (string, error) {
	ev.Relation = d.msgRelation
	ev.ID = lsn.String()
	var c messageContent
	if err := json.Unmarshal(content, &c); err != nil {
		ev.Payload = content // the whole content, for the dead letter
		return "", fmt.Errorf("%w: %w", outbox.ErrBadMessage, err)
	}

	var bad problem
	switch s, kind := jsonString(c.ID); kind {
	case jsonStr, jsonNumber:
		if s != "" {
			ev.ID = s
		}
	case jsonOther:
		bad.set("id", fmt.Errorf("%w: id is not a string or a number", outbox.ErrBadMessage))
	}
	ev.AggregateID = requiredString(&bad, "key", c.Key, outbox.ErrNullKey, outbox.ErrEmptyKey)
	if d.topic != "" {
		ev.Topic = d.topic
	} else {
		ev.Topic = requiredString(&bad, "topic", c.Topic, outbox.ErrNullTopic, outbox.ErrEmptyTopic)
	}
	if c.Payload == nil {
		bad.set("payload", outbox.ErrNullPayload)
	} else {
		ev.Payload = c.Payload // raw JSON text, null included
	}
	switch s, kind := jsonString(c.EventType); kind {
	case jsonStr:
		ev.EventType = s
	case jsonNumber, jsonOther:
		bad.set("event_type", fmt.Errorf("%w: event_type is not a string", outbox.ErrBadMessage))
	}
	if c.Headers != nil {
		hs, err := outbox.ParseHeaders(c.Headers)
		if err != nil {
			bad.set("headers", err)
		}
		ev.Headers = hs
	}
	return bad.col, bad.err
}

type jsonKind uint8

const (
	jsonAbsent jsonKind = iota
	jsonNull
	jsonStr
	jsonNumber
	jsonOther
)

// requiredString returns the string a message's field holds; a field that is absent or null,
// empty, or not a string is the message's problem (nullErr, emptyErr, ErrBadMessage).
func requiredString(bad *problem, field string, raw json.RawMessage, nullErr, emptyErr error) string {
	switch s, kind := jsonString(raw); kind {
	case jsonAbsent, jsonNull:
		bad.set(field, nullErr)
	case jsonStr:
		if s == "" {
			bad.set(field, emptyErr)
		}
		return s
	default:
		bad.set(field, fmt.Errorf("%w: %s is not a string", outbox.ErrBadMessage, field))
	}
	return ""
}

// jsonString classifies a raw JSON value and returns the text of a string or a number.
func jsonString(raw json.RawMessage) (string, jsonKind) {
	raw = bytes.TrimSpace(raw)
	switch {
	case raw == nil:
		return "", jsonAbsent
	case string(raw) == "null":
		return "", jsonNull
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", jsonOther
		}
		return s, jsonStr
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		return string(raw), jsonNumber
	}
	return "", jsonOther
}
