// Package sink delivers to Kafka, through franz-go, the records package record builds, at least
// once.
//
// # Records and the producer
//
// The record contract (topic, key, value, headers, CloudEvents, dead letters) is record's; sink
// owns the producer settings delivery depends on: acks=all, idempotent writes, unlimited retries
// for retriable errors, bounded buffers (Produce blocks once they are full, which is the relay's
// backpressure). Security turns TLS and SASL settings into options. The relay builds each event's
// record itself (record.Builder: the record, or the dead letter of a bad row or of a record more
// than the producer may buffer), decides when to send it, and hands it to sink once
// (Sink.Publish), acting on the Outcome alone.
//
// # Failures
//
// Sink.Classify (failure.go) is the one classification of produce failures, for the relay and the
// poller: a record Kafka refused for good, or too large on its own, is Refused and dead-lettered.
// Before a topic's first record the sink reads its metadata and configuration (topics.go,
// limits.go): a missing topic fails its records at once (TopicMissingError) unless
// Config.CreateTopics, batches are capped at max.message.bytes, and a topic one broker can lose is
// warned about. docs/operations.md, "What happens when things go wrong", lists the classes.
//
// # Tracing
//
// With Config.Tracing (docs/tracing.md) each record's producer span rides in its Context and ends
// at Kafka's acknowledgement, at its letter's parking (TraceParked) or when given up (TraceFailed).
//
// # Contexts and goroutines
//
// A Sink is safe for concurrent use; its goroutines are franz-go's, started by New and ended by
// Close. Promises run on franz-go's callback goroutine and must not block. Produce's ctx bounds
// only the wait for buffer space: records carry context.Background(), so a cancel never fails what
// the client buffers. Flush, Abort and Ping end when their ctx does.
package sink
