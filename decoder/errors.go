package decoder

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
)

// Bad-row reasons: a *RowError wraps one of these. The texts name the default columns; the
// RowError's Column says which column of the relation it was.
var (
	// ErrNullKey means the aggregate id (the Kafka key) is NULL, or missing from a logical message.
	ErrNullKey = errors.New("aggregate_id is NULL")
	// ErrEmptyKey means the aggregate id is the empty string.
	ErrEmptyKey = errors.New("aggregate_id is empty")
	// ErrNullTopic means the topic is NULL (or missing from a logical message) and Config.Topic is unset.
	ErrNullTopic = errors.New("topic is NULL")
	// ErrEmptyTopic means the topic is the empty string and Config.Topic is unset.
	ErrEmptyTopic = errors.New("topic is empty")
	// ErrNullPayload means the payload is NULL, or missing from a logical message.
	ErrNullPayload = errors.New("payload is NULL")
	// ErrNullID means the outbox id is NULL or empty.
	ErrNullID = errors.New("id is NULL or empty")
	// ErrMissingColumn means a required mapped column is not in the relation (dropped or renamed).
	ErrMissingColumn = errors.New("mapped column is not in the relation")
	// ErrBinaryValue means a mapped column arrived in binary format; the relay reads text format.
	ErrBinaryValue = errors.New("value is in binary format, the relay reads text format")
	// ErrBadHeaders means the headers value is not a JSON object.
	ErrBadHeaders = errors.New("headers is not a JSON object")
	// ErrBadMessage means a logical message with the outbox prefix is not in the documented
	// format: content that is not a JSON object, a field of the wrong JSON type, or a
	// non-transactional message.
	ErrBadMessage = errors.New("logical message is not an outbox event")

	// ErrUnknownRelation means an Insert named a relation id no Relation message announced since
	// the decoder was created or Reset. A *ProtocolError wraps it.
	ErrUnknownRelation = errors.New("unknown relation id")
	// ErrProtocol matches every *ProtocolError: the stream is not the pgoutput v1 the decoder expects.
	ErrProtocol = errors.New("pgoutput protocol error")

	// errTruncated is the ProtocolError reason for a message shorter or longer than its fields.
	errTruncated = errors.New("message truncated or malformed")
)

// RowError reports a row (or logical message) that cannot become a valid Kafka record. The
// decoder stays usable: dead-letter the row and go on.
type RowError struct {
	// LSN is the WALStart of the message that carried the row.
	LSN pglogrepl.LSN
	// Relation is "schema.table", or "message:<prefix>" for a logical message.
	Relation string
	// Column is the column (or logical message field) at fault; empty when the fault is the
	// whole message.
	Column string
	// ID is the outbox id when it could be read.
	ID string
	// Err is, or wraps, one of the bad-row sentinels.
	Err error
}

func (e *RowError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decoder: bad row at %s in %s", e.LSN, e.Relation)
	if e.ID != "" {
		fmt.Fprintf(&b, " (id %s)", e.ID)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, ", column %q", e.Column)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("unknown reason")
	}
	return b.String()
}

func (e *RowError) Unwrap() error { return e.Err }

// IsBadRow reports whether err is (or wraps) a *RowError: the row is to be dead-lettered and the
// stream goes on. Any other error from Decode means the stream itself is broken.
func IsBadRow(err error) bool {
	var re *RowError
	return errors.As(err, &re)
}

// ProtocolError reports a message that does not fit the pgoutput v1 protocol or the state of the
// stream. errors.Is(err, ErrProtocol) holds for every ProtocolError.
type ProtocolError struct {
	// LSN is the WALStart of the message.
	LSN pglogrepl.LSN
	// Type is the message's type byte (0 for an empty message).
	Type pglogrepl.MessageType
	// Err says what is wrong; it may wrap ErrUnknownRelation.
	Err error
}

func (e *ProtocolError) Error() string {
	name := e.Type.String()
	if name == "Unknown" {
		name = fmt.Sprintf("message type %q", byte(e.Type))
	} else {
		name += " message"
	}
	return fmt.Sprintf("decoder: protocol error at %s in %s: %v", e.LSN, name, e.Err)
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// Is makes every ProtocolError match ErrProtocol.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }
