// Package poller is `cdc-relay poll`: the polling outbox publisher that the relay replaces, kept
// as the benchmark's baseline and to republish rows a slot cannot give back (a lost slot).
//
// # A cycle
//
// Each cycle is one PostgreSQL transaction: select pending rows (published_at IS NULL, id order,
// FOR UPDATE SKIP LOCKED, at most Config.Batch), produce each as the relay's record
// (record.NewRecord, without cdc-lsn), wait for Kafka's acknowledgement of the whole batch, mark the
// rows published_at, commit. CreateIndex makes the partial index the select needs.
//
// # Guarantees
//
//   - At least once: a row is marked only after Kafka acknowledged its record or its dead letter;
//     a crash between the two publishes the batch again. Per-key order holds for one poller.
//   - Exactly once for read_committed consumers with Config.ExactlyOnce: the batch is one Kafka
//     transaction whose checkpoint names its rows, committed before they are marked; one poller
//     per table (a second with the same transactional id fences the first: ErrFenced).
//   - A broker that does not acknowledge within AckTimeout rolls the batch back; the next cycles
//     probe Kafka first. A record refused for good, or a bad row, is dead-lettered as the relay
//     does (sink.Classify) and then marked; a dead-letter topic that refuses it too stops Run.
//
// docs/outbox.md has the cycle's SQL and each guarantee's reasons.
//
// # Contexts and goroutines
//
// Run polls on the caller's goroutine until ctx ends, then finishes the cycle in progress (within
// AckTimeout), flushes and closes the producer; it starts none of its own (franz-go's are closed
// when Run returns). WatchPending counts the pending rows for the metrics, on a goroutine the
// caller owns, until its ctx ends.
package poller
