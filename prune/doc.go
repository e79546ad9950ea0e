// Package prune deletes outbox rows that have been published, in batches, so the outbox
// table does not grow forever (`cdc-relay outbox prune`).
//
// Two modes, one per publisher:
//
//   - ModePoll (`cdc-relay poll`): a row is published when its published_at is set.
//   - ModeRun (`cdc-relay run`): nothing in the row says it was published; the slot says it.
//
// In both modes only rows whose created_at is older than Options.OlderThan are candidates.
//
// # How ModeRun decides that a row reached Kafka
//
// A row may be deleted once the slot's confirmed_flush_lsn has passed the end of the commit
// record of the transaction that inserted it: the relay confirms a position only when every
// transaction committed before it is acknowledged by Kafka (DESIGN.md). The commit LSN of a
// row is not available in SQL, so Run brackets it with a mark:
//
//  1. xmin0 = pg_snapshot_xmin(pg_current_snapshot()): every transaction with an xid before
//     xmin0 had finished when the mark was taken.
//  2. Then lsn0 = pg_current_wal_insert_lsn(). A transaction that finished before step 1 wrote
//     its commit record before that, so the record ends at or before lsn0. (The insert, not
//     the write, position: with synchronous_commit = off a commit is visible before it is
//     written.)
//  3. Wait until the slot's confirmed_flush_lsn >= lsn0 (the relay confirms as it publishes, and
//     follows the WAL end when idle), or give up after Options.Wait and delete nothing.
//  4. Delete candidate rows whose xmin precedes xmin0. Such a row is visible, so its transaction
//     committed before the mark; its commit ended at or before lsn0 <= confirmed_flush_lsn, so
//     Kafka has it. A row whose transaction was still open at the mark, however old its
//     created_at, waits for a later run: created_at alone proves nothing (it is the
//     transaction's start time, and the application may set it).
//
// xmin is compared with age(), which is exact for the rows that matter (younger than the
// mark, so within 2^31 transactions); a row so old that age() wraps is older than the mark and
// deleting it is right. The xid of an UPDATE replaces the insert's in xmin, which only makes a
// row wait longer. A long-running transaction holds xmin0 back and so delays pruning: that is
// the price of never deleting an unpublished row. So that an operator can see it, Run reports
// how many old rows it kept (Result.Kept) and the oldest transaction open when it ends
// (Result.Holder: its pid, or a forgotten prepared transaction's gid), which is what holds
// them back.
//
// Deleting rows is invisible to the relay: the publication is insert-only, so the DELETEs are
// not published, and a row inserted and deleted in the same transaction is still published
// from its INSERT in the WAL.
//
// Each batch is its own transaction (the lowest ids first), so locks stay short and a stopped
// prune leaves a consistent table. Contexts and goroutines: Run works on the caller's
// goroutine and connection and starts none; cancelling its ctx cancels the statement in flight
// (the batch rolls back) and Run returns.
package prune
