// Package relay is the pipeline glue of `cdc-relay run`: replication stream in, decoder in the
// middle, Kafka out, and the tracker that turns Kafka acknowledgements into the flush position
// confirmed to PostgreSQL.
//
// # What is confirmed
//
// The position confirmed is the end LSN of the newest transaction T such that every record of T
// and of every earlier transaction has been acknowledged by Kafka, or parked as a dead letter.
// When nothing is in flight, a keepalive's WAL end is confirmed, so a quiet outbox does not retain
// other tables' WAL (DESIGN.md, rules 1-3).
//
// # Delivery
//
// At least once, records go to the sink's idempotent producer (delivery.go). With
// Config.ExactlyOnce (exactly.go) the producer is the slot's transactional one: the pipeline owns
// the open Kafka transaction, the position confirmed is only ever a committed checkpoint's (or an
// idle keepalive's WAL end while none is open), and a lost session, a fence or a failed commit
// ends Run with an error so that the restart replays (docs/design/exactly-once.md).
//
// # Contexts and goroutines
//
// Run owns every goroutine it starts and returns only after all have ended: the stream's (owns the
// connection), the pipeline's (owns the decoder, produces), the dead-letter goroutine and the
// Kafka watcher; franz-go's promise goroutine reports acknowledgements and never blocks.
// Cancelling Run's ctx is the clean stop: reading stops at once, then Kafka is flushed and the
// final status sent under ShutdownTimeout, never under the cancelled ctx. Records carry
// context.Background(): a cancel must not fail what Kafka buffers (DESIGN.md, "Records carry").
package relay
