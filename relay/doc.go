// Package relay is the pipeline glue of `cdc-relay run`: replication stream in, decoder in the
// middle, Kafka sink out, and the tracker that turns Kafka acknowledgements into the flush
// position confirmed to PostgreSQL.
//
// The invariant (DESIGN.md): the position confirmed is the end LSN of the newest transaction T
// such that every record of T and of every earlier transaction has been acknowledged by Kafka,
// or parked on the dead-letter topic and acknowledged there. When nothing is in flight, a
// keepalive's WAL end is confirmed, so a quiet outbox does not retain other tables' WAL.
//
// Goroutines: the replication stream's (owns the connection), the pipeline's (owns the decoder
// and produces), franz-go's promise goroutine (reports acknowledgements to the tracker, never
// blocks) and the dead-letter goroutine (re-produces records Kafka rejected for good).
// Shutdown: stop reading, flush Kafka with a deadline, send the final status, close.
package relay
