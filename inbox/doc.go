// Package inbox makes a Kafka consumer's effect happen once although cdc-relay delivers
// at least once (seed 001, "Inbox и дедупликация на стороне потребителя").
//
// Every record cdc-relay publishes carries the outbox id in its outbox-id header and its source
// in its outbox-table header ("schema.table", or "message:<prefix>" for a logical message).
// Outbox ids are unique per table only: two outbox tables in one publication both have an id 1,
// so the inbox keys a mark by (consumer, source table, outbox id). Inside the caller's
// PostgreSQL transaction, Inbox.Process inserts that key into the processed table with
// ON CONFLICT DO NOTHING and runs the handler only when the row is new. The mark and the
// handler's writes commit or roll back together, so:
//
//   - a duplicate (the relay's replay window, a consumer that re-reads after a crash) finds the
//     row and is skipped;
//   - two consumers racing on the same key serialize on the primary key: the second waits for
//     the first transaction and skips if it committed, or processes if it rolled back;
//   - a handler that fails rolls the mark back with its own writes, so the redelivery runs it again.
//
// The guarantee covers what the handler writes in the same transaction. A side effect outside
// PostgreSQL (an HTTP call, an email) needs its own idempotency key: the source table and the
// outbox id together are a good one.
//
// The table (CreateTable makes it; the name is configurable, and one without a schema means
// public.name, never what the connection's search_path finds: see CreateTable):
//
//	CREATE TABLE IF NOT EXISTS public.inbox_processed (
//	    consumer     text,
//	    outbox_table text NOT NULL DEFAULT '',
//	    outbox_id    text,
//	    processed_at timestamptz DEFAULT now(),
//	    PRIMARY KEY (consumer, outbox_table, outbox_id)
//	);
//
// # Records without outbox-table, and tables made before it
//
// A record published before the header existed has none: Handle passes the empty table, so such
// records deduplicate by outbox id alone, as before. A processed table made before the header
// (PRIMARY KEY (consumer, outbox_id)) is migrated in two steps, so that a rolling upgrade never
// stalls: consumers of the older version insert with ON CONFLICT (consumer, outbox_id), which
// fails (42P10) on every record once that key is gone.
//
//  1. CreateTable, the first time an upgraded consumer runs it, adds the column with the empty
//     string for the existing marks (which therefore keep absorbing redeliveries of the old
//     records) and a unique index on (consumer, outbox_table, outbox_id), and keeps the old
//     primary key. The index build holds a lock that blocks writes to the table. Old and new
//     consumers then run side by side and dedupe against each other's marks; the old key still
//     deduplicates by outbox id alone, as the older version does, and Process refuses with
//     ErrMigrationUnfinished (instead of skipping it) a record whose id only a mark of another
//     source table holds.
//  2. Once no consumer of the older version runs, Inbox.FinishMigration drops the old key and
//     makes the index the primary key (a moment's exclusive lock, no index build).
//
// To do it ahead of time on a large table, or by hand (the index name is PostgreSQL's default):
//
//	-- step 1, any time
//	ALTER TABLE inbox_processed ADD COLUMN outbox_table text NOT NULL DEFAULT '';
//	CREATE UNIQUE INDEX CONCURRENTLY inbox_processed_consumer_outbox_table_outbox_id_idx
//	    ON inbox_processed (consumer, outbox_table, outbox_id);
//	-- step 2, once every consumer is upgraded
//	ALTER TABLE inbox_processed DROP CONSTRAINT inbox_processed_pkey,
//	    ADD PRIMARY KEY USING INDEX inbox_processed_consumer_outbox_table_outbox_id_idx;
//
// An old mark does not match a record that carries the header: a record the consumer processed
// from a relay without the header, and that an upgraded relay publishes again (its replay window
// at the restart, or a republish with cdc-relay poll), runs the handler a second time. Matching
// old marks by id alone would instead skip every new event of one table whose id an old mark of
// another table holds, until the marks are pruned; a duplicate inside the replay window is the
// smaller risk. It is avoided by upgrading the consumers first and stopping the old relay
// cleanly (SIGTERM: it confirms everything Kafka acknowledged, so the new one replays nothing).
//
// # Trace context
//
// A producer that writes a W3C traceparent (and tracestate) into the outbox row's headers in its
// transaction gets them on the record as they are, or, when the relay traces
// (docs/tracing.md), the relay's producer span in their place, itself the producer's span's
// child. Handle extracts them (propagation.TraceContext by default, Config.Propagator
// otherwise) into the ctx it passes to the transaction and the handler, so
// trace.SpanContextFromContext(ctx) in the handler is that span (the producer's, or the
// relay's under it) and a span the handler starts from ctx is its child. HeaderCarrier is the propagation carrier over a
// record's headers, for code that does not go through Handle.
//
// # Pruning
//
// Old rows can be removed with Prune once no redelivery can be that old (the Kafka topic's
// retention, or how far back a consumer group may be reset).
//
// Contexts and goroutines: the package starts no goroutines. Every method takes ctx first and
// passes it to pgx (a cancel rolls the caller's transaction back with the statement); Handle
// runs the transaction and the handler with it. An Inbox holds no connection and is safe for
// concurrent use.
package inbox
