// Package cutover moves an outbox table between a polling publisher (published_at) and the relay
// (a replication slot) without losing a row, with one named window of duplicates each way.
//
// # From polling to the relay
//
// Run (`cdc-relay cutover`), with the old poller stopped, creates the slot with EXPORT_SNAPSHOT,
// lists the rows pending in that snapshot (exactly those committed before the slot's consistent
// point, which the slot never streams) and publishes them through the poller's own path
// (poller.PublishRows: locked, produced, acknowledged, then marked). Duplicates come only from
// the old poller's window: rows it produced but had not marked. A Run that fails after creating
// the slot drops it again, so running it again is safe.
//
// # From the relay back to polling
//
// MarkDelivered (`cdc-relay outbox mark-published`), with the relay stopped, marks published
// every pending row of one REPEATABLE READ snapshot except those a peek at the slot (up to the
// WAL insert position) shows after its confirmed position. Duplicates come only from the relay's
// replay window (none after a clean stop). An empty list of ids is an empty array, never NULL.
//
// docs/outbox.md walks both procedures step by step, with why each step is safe.
//
// # Contexts and goroutines
//
// Run and MarkDelivered work on the caller's goroutine and connections; Run's producer has
// franz-go's goroutines, closed before it returns. Cancelling ctx cancels the statement or wait in
// flight; a Run cancelled after it created the slot drops it under a fresh 10 s deadline.
package cutover
