package poller

import "errors"

var (
	// ErrNoTable means the outbox table does not exist (or is not visible to the user).
	ErrNoTable = errors.New("poller: outbox table not found")
	// ErrMissingColumn means a column the poller needs is not in the table; the error names
	// it and the flag that maps it.
	ErrMissingColumn = errors.New("poller: outbox column not found")
	// ErrUnavailable means Kafka did not answer a probe or did not acknowledge a batch in
	// time: the cycle was rolled back and its rows stay pending.
	ErrUnavailable = errors.New("poller: Kafka is unavailable")
	// ErrDeadLetterRefused means the dead-letter topic refused a record too. The poller stops
	// rather than mark a row it could neither publish nor park.
	ErrDeadLetterRefused = errors.New("poller: dead-letter topic refused a record")
	// ErrInvalidIndex means an index with the pending-rows index's name exists but is not
	// valid (a CREATE INDEX CONCURRENTLY that failed); drop it and create it again.
	ErrInvalidIndex = errors.New("poller: pending-rows index exists but is invalid")
)

// IsRetryable reports whether a failed cycle may succeed when tried again: Kafka or
// PostgreSQL was unavailable. Configuration problems and a dead-letter topic that refuses
// records are not retryable.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrNoTable), errors.Is(err, ErrMissingColumn), errors.Is(err, ErrDeadLetterRefused):
		return false
	}
	return true
}
