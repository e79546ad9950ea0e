// Package sink publishes outbox events to Kafka through franz-go.
//
// It owns the record contract (topic, key, value and headers; see NewRecord), the producer
// configuration that delivery depends on (acks=all, idempotent writes, unlimited retries for
// retriable errors, bounded buffers), and the classification of produce failures into the
// failure classes of DESIGN.md: a broker that is unavailable is retried inside the client
// (Produce blocks once the buffers are full, which is the relay's backpressure), while a
// record Kafka rejects for good reaches its promise with an error for which Rejected reports
// true, so the caller can dead-letter it. Security turns TLS and SASL settings into the
// client's options; a failed connection's error says what to check (the TLS hints are
// internal/tlshint's table, shared with cmd's PostgreSQL hints).
//
// A Sink is safe for concurrent use. Promises run on franz-go's callback goroutine and must
// not block.
package sink
