package outbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/internal/contract"
)

// Bad-row reasons: a *RowError wraps one of these. The texts name the default columns; the
// RowError's Column says which column of the table it was. The poller gives the first seven;
// the rest are the relay's (the WAL's tuples and logical messages).
var (
	// ErrNullKey means the aggregate id (the Kafka key) is NULL, or missing from a logical message.
	ErrNullKey = errors.New("aggregate_id is NULL")
	// ErrEmptyKey means the aggregate id is the empty string.
	ErrEmptyKey = errors.New("aggregate_id is empty")
	// ErrNullTopic means the topic is NULL (or missing from a logical message) and no fixed topic is set.
	ErrNullTopic = errors.New("topic is NULL")
	// ErrEmptyTopic means the topic is the empty string and no fixed topic is set.
	ErrEmptyTopic = errors.New("topic is empty")
	// ErrNullPayload means the payload is NULL, or missing from a logical message.
	ErrNullPayload = errors.New("payload is NULL")
	// ErrBadHeaders means the headers value is not a JSON object.
	ErrBadHeaders = errors.New("headers is not a JSON object")
	// ErrReservedHeader means the headers object uses a name of the record contract
	// (internal/contract: outbox-id, outbox-table, aggregate-id, event-type, cdc-lsn,
	// cdc-commit-time, cdc-replayed-at, any dlq-* or ce_* name), in any ASCII case. A row
	// header of that name would stand beside the publisher's own and shadow it for a consumer
	// that reads the last one (Java's Headers.lastHeader), so the row is a bad row, never
	// published with two. The reason names the headers, e.g.
	// `headers: "outbox-id" is reserved by the record contract`.
	ErrReservedHeader = contract.ErrReserved
	// ErrNullID means the outbox id is NULL or empty.
	ErrNullID = errors.New("id is NULL or empty")
	// ErrMissingColumn means a required mapped column is not in the relation (dropped or renamed).
	ErrMissingColumn = errors.New("mapped column is not in the relation")
	// ErrBinaryValue means a mapped column arrived in binary format; the relay reads text format.
	ErrBinaryValue = errors.New("value is in binary format, the relay reads text format")
	// ErrBadMessage means a logical message with the outbox prefix is not in the documented
	// format: content that is not a JSON object, a field of the wrong JSON type, or a
	// non-transactional message.
	ErrBadMessage = errors.New("logical message is not an outbox event")
)

// RowError reports a row (or logical message) that cannot become a valid Kafka record. The
// publisher dead-letters it with this error and goes on.
type RowError struct {
	// LSN is the WALStart of the message that carried the row; zero for a row the poller read.
	LSN pglogrepl.LSN
	// Relation is "schema.table", or "message:<prefix>" for a logical message.
	Relation string
	// Column is the column (or logical message field) at fault; empty when the fault is the
	// whole message.
	Column string
	// ID is the outbox id when it could be read.
	ID string
	// Err is, or wraps, one of the bad-row reasons.
	Err error
}

func (e *RowError) Error() string {
	var b strings.Builder
	b.WriteString("outbox: bad row")
	if e.LSN != 0 {
		fmt.Fprintf(&b, " at %s", e.LSN)
	}
	fmt.Fprintf(&b, " in %s", e.Relation)
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

// IsBadRow reports whether err is (or wraps) a *RowError: the row is to be dead-lettered and
// the stream goes on.
func IsBadRow(err error) bool {
	var re *RowError
	return errors.As(err, &re)
}
