// Package contract names the headers of the Kafka record contract (README, "The Kafka record")
// and says which names a row's own headers may not take.
//
// # Who uses it
//
// It is a leaf so that every package that writes, refuses or reads these names uses one list
// without importing another: record writes the headers, outbox (for the decoder and the poller)
// refuses rows that use the names, inbox reads two of them (DESIGN.md, "Shape"). HeaderCarrier
// is the one OpenTelemetry carrier over a record's headers, for the sink's spans and the inbox.
//
// # Contexts and goroutines
//
// Names, pure functions and the carrier: no I/O, no goroutines, no context.
package contract
