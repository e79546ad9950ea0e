// Package record is the record contract (README, "The Kafka record"): the Kafka record an
// outbox event becomes, and the dead letter that parks it. Change the contract here.
//
// # The record and its letter
//
//   - NewRecord: the event's topic, key = aggregate id, value = payload, and the headers in
//     order: outbox-id, outbox-table, aggregate-id, event-type, the row's own, then the
//     transaction's Stamp (cdc-lsn, cdc-commit-time). Header names are internal/contract's.
//   - CloudEvents (cloudevents.go): with --format cloudevents, the binding's ce_* headers and
//     content-type follow; key and value stay.
//   - DeadLetter: the original record on the dead-letter topic with dlq-error, dlq-class
//     (LetterClass, from the error's type), dlq-original-topic and dlq-relation; ce_* headers
//     travel renamed dlq-ce_*.
//   - Builder (build.go): what a publisher does with an event before it sends anything: its
//     record, or its dead letter when the row is bad or the record is larger than the producer
//     may buffer. The relay builds with it and hands sink the Publication to send.
//
// # Who uses it
//
// The relay and the poller build records and letters with it, deadletters reads and replays
// parked letters by its names, the benchmarks build the relay's records with it. It imports only
// outbox, internal/contract and the types of franz-go, pglogrepl (the LSN) and pgconn (the
// database's name for CloudEvents' source): sink, which delivers the records, imports it, never
// the reverse (DESIGN.md, "Shape").
//
// # Contexts and goroutines
//
// Pure functions over values: no I/O, no goroutines, no context.
package record
