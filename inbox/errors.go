package inbox

import "errors"

var (
	// ErrNoOutboxID means a record has no outbox-id header (or an empty one): it did not come
	// from cdc-relay, and there is nothing to deduplicate by.
	ErrNoOutboxID = errors.New("inbox: record has no outbox-id header")
	// ErrNoConsumer means Config.Consumer is empty.
	ErrNoConsumer = errors.New("inbox: no consumer name")
	// ErrMigrationUnfinished means a record's (source table, outbox id) conflicts with the mark
	// of another source table with the same id, because the processed table still has the
	// primary key (consumer, outbox_id) of the version before the outbox-table header, kept so
	// that consumers of that version go on working during a rolling upgrade. Once none runs,
	// finish the migration (Inbox.FinishMigration, or the statements in the package
	// documentation); the record is then processed.
	ErrMigrationUnfinished = errors.New("inbox: the processed table's migration is unfinished: it still has the primary key (consumer, outbox_id)")
)
