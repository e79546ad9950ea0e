// Package relay is the pipeline glue of `cdc-relay run`: replication stream in, decoder in the
// middle, Kafka sink out, and the tracker that turns Kafka acknowledgements into the flush
// position confirmed to PostgreSQL.
//
// The invariant (DESIGN.md): the position confirmed is the end LSN of the newest transaction T
// such that every record of T and of every earlier transaction has been acknowledged by Kafka,
// or parked on the dead-letter topic and acknowledged there. When nothing is in flight, a
// keepalive's WAL end is confirmed, so a quiet outbox does not retain other tables' WAL.
//
// With Config.ExactlyOnce (exactly.go) the producer is the slot's transactional one: the
// pipeline owns the open Kafka transaction, and the position confirmed is only ever a committed
// checkpoint's (or an idle keepalive's WAL end while no Kafka transaction is open); a lost
// session, a fence or a commit that failed ends Run with an error, and the restart replays.
//
// Contexts and goroutines: Run owns every goroutine it starts and returns only after all have
// ended: the replication stream's (owns the connection), the pipeline's (owns the decoder and
// produces), the dead-letter goroutine (re-produces records Kafka rejected for good) and the
// Kafka watcher (probes during an outage); franz-go's promise goroutine reports
// acknowledgements to the tracker and never blocks. Cancelling Run's ctx is the clean stop
// (SIGTERM): reading stops at once, then Kafka is flushed and the final status sent under
// their own deadline (ShutdownTimeout), never under the cancelled ctx. Records carry
// context.Background(): a cancel must not fail what Kafka already buffers (DESIGN.md,
// "Records carry").
package relay
