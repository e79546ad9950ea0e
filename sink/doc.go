// Package sink publishes outbox events to Kafka through franz-go.
//
// It owns the record contract (topic, key, value and headers; see NewRecord), the producer
// configuration that delivery depends on (acks=all, idempotent writes, unlimited retries for
// retriable errors, bounded buffers), and the classification of produce failures into the
// failure classes (docs/operations.md, "What happens when things go wrong"): a broker that is unavailable is retried inside the client
// (Produce blocks once the buffers are full, which is the relay's backpressure), while a
// record Kafka rejects for good reaches its promise with an error that Sink.Classify calls
// Refused (failure.go: Kafka refused the record itself, and one too large is too large on its
// own), so the caller dead-letters it. The relay and the poller both classify with Classify,
// so a failure means the same to both. Before a topic's first record the sink reads its
// metadata and configuration (topics.go, limits.go): a topic that does not exist fails its
// records at once (TopicMissingError) or is created (Config.CreateTopics), the topic's batches
// are capped at its max.message.bytes, and a topic one broker can lose is warned about; the
// topics of Config.Topics are checked at Ping. Security turns TLS and SASL settings into the
// client's options; a failed connection's error says what to check (the TLS hints are
// internal/tlshint's table, shared with cmd's PostgreSQL hints).
//
// Tracing (Config.Tracing, docs/tracing.md): Produce gives each record a producer span, a child
// of the trace context in its headers, and sets the record's traceparent to it when it is
// sampled. The span rides in the record's Context to the promise, which ends it at Kafka's
// acknowledgement; a failed record's span stays open for its publisher, which dead-letters
// the record (DeadLetter keeps the Context: the span goes on) or gives it up (TraceFailed).
// TraceParked ends a dead letter's span when the PostgreSQL table has it.
//
// Contexts and goroutines: a Sink is safe for concurrent use; its goroutines are franz-go's,
// started by New and ended by Close. Promises run on franz-go's callback goroutine and must
// not block. The ctx of Produce bounds only the wait for buffer space: records themselves
// carry context.Background(), so a cancel never fails what the client already buffers; Flush,
// Abort and Ping end when their ctx does.
package sink
