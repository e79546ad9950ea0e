// Package poller is `cdc-relay poll`: the polling outbox publisher that the relay replaces,
// kept as a baseline for the benchmark and as a way to republish rows the slot cannot give
// back (a lost slot). It reads pending rows from the outbox table instead of the WAL.
//
// # A cycle
//
// Each cycle is one PostgreSQL transaction:
//
//	SELECT ... FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT $batch FOR UPDATE SKIP LOCKED
//	produce every row with sink.NewRecord; wait for Kafka's acknowledgements of the whole batch
//	(exactly-once: the records are in a Kafka transaction, committed here with the checkpoint)
//	UPDATE outbox SET published_at = now() WHERE id = ANY($1) AND published_at IS NULL
//	COMMIT
//
// Records are the relay's records (sink.NewRecord): the same topic, key, value and headers
// (outbox-table is the table's "schema.table", as the relay names the relation), except that
// there is no cdc-lsn and cdc-commit-time is the row's created_at.
//
// # Guarantees
//
//   - At least once. A row is marked published only after Kafka acknowledged its record (or
//     its dead-letter record), in the same transaction that locked it. A crash between the
//     acknowledgement and the COMMIT publishes the batch again: duplicates, never loss.
//   - Several pollers may run at once: FOR UPDATE SKIP LOCKED gives each cycle rows no other
//     cycle holds, so a clean run publishes every row once. Per-key order holds for one
//     poller (rows go out in id order and a batch is acknowledged before the next is
//     selected); with several pollers, two rows of one key may be published by different
//     pollers in either order.
//   - Exactly once for read_committed consumers, with Config.ExactlyOnce (`poll --delivery
//     exactly-once`, DESIGN.md "`poll --delivery exactly-once`"): the batch is one Kafka
//     transaction whose checkpoint (txn.Batch) names its rows, committed after every record
//     (or its dead letter) was acknowledged and before the rows are marked. On start, and after
//     a mark that failed, the rows of the newest checkpoint are marked before anything is
//     selected, so a crash between the commit and the mark publishes nothing twice. A failed
//     batch is aborted: none of it is visible. One poller per table: a second one with the same
//     transactional id fences the first (ErrFenced, it stops), and pollers with other ids, or
//     at-least-once ones, on the same table void the guarantee. Its select waits for the rows a
//     fenced or paused predecessor holds locked (no SKIP LOCKED), so per-key order holds across
//     a takeover; its sessions end a transaction idle past the Kafka transaction timeout
//     (idle_in_transaction_session_timeout), which bounds that wait.
//   - Broker unavailable: a batch that Kafka does not acknowledge within AckTimeout is rolled
//     back, so its rows stay pending and no per-row budget exists to be spent. The client's
//     buffered copies are aborted, and every following cycle first probes Kafka with one
//     metadata request (ProbeTimeout) and touches no row until the probe answers.
//   - Rejected for good (too large on its own, invalid or unauthorised topic: sink.Classify's
//     Refused, the relay's classification; a batch refused as too large although its records
//     fit is rolled back like an unavailable broker's) and bad rows (NULL or empty
//     key, NULL payload, headers that are not a JSON object or that use a name reserved by the
//     record contract, such as outbox-id or cdc-lsn): parked on the dead-letter topic
//     with the reason, the same as the relay, and then marked published. A dead-letter topic
//     that refuses them too stops the poller with an error: nothing is dropped silently.
//
// # Index
//
// The SELECT needs a partial index on the pending rows, or each cycle scans every published
// row too. CreateIndex makes it (`cdc-relay poll --create-index`):
//
//	CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_pending_idx ON public.outbox (id) WHERE published_at IS NULL
//
// # Contexts and goroutines
//
// Run polls on the caller's goroutine until its context ends; the package starts no goroutines
// of its own (the producer has franz-go's, closed when Run returns). When ctx ends, the cycle
// in progress is finished (within AckTimeout) so the rows Kafka already holds are marked; then
// the producer is flushed and closed. WatchPending, run beside it in a goroutine the caller
// owns, counts the pending rows for the metrics on the same pool until its context ends.
package poller
