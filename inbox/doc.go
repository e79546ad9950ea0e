// Package inbox makes a Kafka consumer's effect happen once although cdc-relay delivers
// at least once (seed 001, "Inbox и дедупликация на стороне потребителя").
//
// Every record cdc-relay publishes carries the outbox id in its outbox-id header. Inside the
// caller's PostgreSQL transaction, Inbox.Process inserts (consumer, outbox id) into the
// processed table with ON CONFLICT DO NOTHING and runs the handler only when the row is new.
// The mark and the handler's writes commit or roll back together, so:
//
//   - a duplicate (the relay's replay window, a consumer that re-reads after a crash) finds the
//     row and is skipped;
//   - two consumers racing on the same id serialize on the primary key: the second waits for
//     the first transaction and skips if it committed, or processes if it rolled back;
//   - a handler that fails rolls the mark back with its own writes, so the redelivery runs it again.
//
// The guarantee covers what the handler writes in the same transaction. A side effect outside
// PostgreSQL (an HTTP call, an email) needs its own idempotency key: the outbox id is a good one.
//
// The table (CreateTable makes it; the name is configurable):
//
//	CREATE TABLE IF NOT EXISTS inbox_processed (
//	    consumer     text,
//	    outbox_id    text,
//	    processed_at timestamptz DEFAULT now(),
//	    PRIMARY KEY (consumer, outbox_id)
//	);
//
// Old rows can be removed with Prune once no redelivery can be that old (the Kafka topic's
// retention, or how far back a consumer group may be reset).
//
// Context: every method takes ctx first and passes it to pgx. An Inbox holds no connection and
// is safe for concurrent use.
package inbox
