package poller

import (
	"errors"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/schema"
)

var (
	// ErrNoTable means the outbox table does not exist (or is not visible to the user).
	ErrNoTable = errors.New("poller: outbox table not found")
	// ErrMissingColumn means a column the poller needs is not in the table; the error names
	// it and the flag that maps it.
	ErrMissingColumn = errors.New("poller: outbox column not found")
	// ErrPayloadType means the payload column is of a type the poller does not publish (it
	// takes outbox.PayloadTypes); the error names the column and its type.
	ErrPayloadType = errors.New("poller: payload column of an unpublished type")
	// ErrUnavailable means Kafka did not answer a probe or did not acknowledge a batch in
	// time: the cycle was rolled back and its rows stay pending.
	ErrUnavailable = errors.New("poller: Kafka is unavailable")
	// ErrDeadLetterRefused means the dead-letter topic refused a record too. The poller stops
	// rather than mark a row it could neither publish nor park.
	ErrDeadLetterRefused = errors.New("poller: dead-letter topic refused a record")
	// ErrInvalidIndex means an index with the pending-rows index's name exists but is not
	// valid (a CREATE INDEX CONCURRENTLY that failed); drop it and create it again.
	ErrInvalidIndex = errors.New("poller: pending-rows index exists but is invalid")
	// ErrFenced means another poller started with this one's transactional id (exactly-once):
	// it holds the id now, and this one must stop without publishing or marking anything.
	ErrFenced = errors.New("poller: another poller took this poller's transactional id (fenced)")
	// ErrCheckpointOfAnotherTable means the newest checkpoint under the transactional id names
	// another outbox table: two tables' pollers were given one --transactional-id.
	ErrCheckpointOfAnotherTable = errors.New("poller: the checkpoint names another table")
	// ErrCheckpointTooLarge means a batch's checkpoint, which names every row of the batch, is
	// more than the checkpoint topic or the producer takes: lower the batch size.
	ErrCheckpointTooLarge = errors.New("poller: the batch's checkpoint is too large")
)

// IsRetryable reports whether a failed cycle may succeed when tried again: Kafka or
// PostgreSQL was unavailable. Configuration problems, a dead-letter topic that refuses
// records and a fenced exactly-once poller are not retryable.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrNoTable), errors.Is(err, ErrMissingColumn), errors.Is(err, ErrPayloadType), errors.Is(err, ErrDeadLetterRefused),
		errors.Is(err, ErrFenced), errors.Is(err, ErrCheckpointOfAnotherTable), errors.Is(err, ErrCheckpointTooLarge),
		errors.As(err, new(*kafkatxn.NotCompactedError)), errors.As(err, new(*schema.ConfigError)):
		return false
	}
	return true
}
