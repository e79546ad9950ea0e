// Package cutover moves an outbox table between a polling publisher (published_at) and the
// relay (a replication slot) without losing a row and with one named window of duplicates.
//
// # From polling to the relay: Run (`cdc-relay cutover`)
//
// The old poller is stopped first, at any moment. Run then
//
//  1. creates the publication if needed and the slot over a replication connection with
//     CREATE_REPLICATION_SLOT ... LOGICAL pgoutput EXPORT_SNAPSHOT. The exported snapshot sees
//     exactly the transactions committed before the slot's consistent point; the slot streams
//     the ones committed after it.
//  2. imports the snapshot on a normal connection (BEGIN ISOLATION LEVEL REPEATABLE READ; SET
//     TRANSACTION SNAPSHOT) and lists the ids of the rows pending in it (published_at IS
//     NULL), then ends that transaction and closes the replication connection: the snapshot
//     is held for one index scan, not for the whole publishing.
//  3. publishes those rows with the poller's record and cycle (poller.PublishRows): locked
//     with FOR UPDATE, produced, acknowledged by Kafka, then marked published_at in the same
//     transaction. A row marked meanwhile is not sent again.
//
// Every row committed before the consistent point and not marked by the old poller goes out
// here; every row committed after it is streamed by `cdc-relay run` from the slot. Duplicates
// come only from the old poller's own window: rows it had produced but not yet marked when it
// was stopped (at most one batch per poller process). If Run fails after creating the slot it
// drops the slot again (no relay has read from it), so running it again is safe; if it is
// killed, drop the slot by hand (`cdc-relay slot drop`) and run it again.
//
// # From the relay back to polling: MarkDelivered (`cdc-relay outbox mark-published`)
//
// The relay never sets published_at, so a poller started after it would publish every row
// again. With the relay stopped (the slot inactive, its confirmed_flush_lsn final),
// MarkDelivered
//
//  1. opens a REPEATABLE READ transaction A and takes its snapshot;
//  2. then, on a second connection, reads lsn0 = pg_current_wal_insert_lsn() and peeks at the
//     slot up to lsn0 (pg_logical_slot_peek_binary_changes: nothing is consumed): the outbox
//     ids of the transactions committed after the slot's confirmed position, which the relay
//     has not confirmed;
//  3. in A, sets published_at on every pending row except those ids (an empty array when
//     there are none, as after a clean stop: never NULL, which would mark nothing), and commits.
//
// A row visible in A's snapshot committed before lsn0. If its commit is at or before the
// confirmed position, the relay delivered it (it confirms only what Kafka acknowledged) and it
// is marked; if after, the peek listed it and it stays pending for the poller. Rows committed
// after the snapshot stay pending too. Duplicates come only from the relay's replay window:
// rows Kafka acknowledged whose position the relay had not confirmed when it stopped (none
// after a clean stop; up to --confirm-delay of them after a kill -9).
//
// # Contexts and goroutines
//
// Run and MarkDelivered work on the caller's goroutine and connections; Run's producer has
// franz-go's goroutines, closed before Run returns. Cancelling ctx cancels the statement or the
// wait in flight and the call returns; a Run that fails or is cancelled after it created the
// slot drops the slot again under a fresh 10 s deadline, so no half-made slot is left behind.
package cutover
