// Package inbox makes a Kafka consumer's effect happen once although cdc-relay delivers at
// least once: a consumer-side deduplication table in the consumer's own PostgreSQL database.
//
// # Processing a record
//
// Handle (or Process, inside a transaction the caller holds) inserts the record's key, (consumer,
// outbox-table header, outbox-id header), into the processed table with ON CONFLICT DO NOTHING
// and runs the handler only when the row is new. The mark and the handler's writes commit or roll
// back together: a duplicate is skipped, two consumers racing on one key serialize on it, and a
// failed handler's mark rolls back so the redelivery runs it again (not a side effect outside).
//
// # The table
//
// CreateTable makes it (a name without a schema is public.name, never what search_path finds) and
// migrates a table made before the outbox-table header in two steps with FinishMigration; a
// record without the header deduplicates by outbox id alone. Prune removes marks older than any
// redelivery can be. docs/inbox.md has the DDL, the migration by hand, and its one risk.
//
// # Trace context
//
// Handle extracts the record's W3C traceparent and tracestate (Config.Propagator, TraceContext by
// default) into the ctx it passes to the transaction and the handler, so a span the handler starts
// is a child of the producer's (or of the relay's, when the relay traces). HeaderCarrier is the
// propagation carrier for code that does not go through Handle.
//
// # Contexts and goroutines
//
// No goroutines. Every method takes ctx first and passes it to pgx (a cancel rolls the caller's
// transaction back). An Inbox holds no connection and is safe for concurrent use.
package inbox
