// Package contract names the headers of the Kafka record contract (README, "The Kafka record")
// and says which names a row's own headers may not take.
//
// # Who uses it
//
// It is a leaf so that every package that writes, refuses or reads these names uses one list
// without importing another: sink writes the headers, outbox (for the decoder and the poller)
// refuses rows that use the names, inbox reads two of them (DESIGN.md, "Shape").
//
// # Contexts and goroutines
//
// Names and pure functions: no I/O, no goroutines, no context.
package contract
