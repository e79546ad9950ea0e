package inbox

import "errors"

var (
	// ErrNoOutboxID means a record has no outbox-id header (or an empty one): it did not come
	// from cdc-relay, and there is nothing to deduplicate by.
	ErrNoOutboxID = errors.New("inbox: record has no outbox-id header")
	// ErrNoConsumer means Config.Consumer is empty.
	ErrNoConsumer = errors.New("inbox: no consumer name")
)
