// Package prune deletes published outbox rows in batches so the outbox table does not grow
// forever (`cdc-relay outbox prune`). Only rows older than Options.OlderThan are candidates.
//
// # Modes
//
//   - ModePoll (`cdc-relay poll`): a row is published when its published_at is set.
//   - ModeRun (`cdc-relay run`): nothing in the row says so; the slot does.
//
// # How ModeRun decides that a row reached Kafka
//
// A row may go once the slot's confirmed_flush_lsn passed its transaction's commit record. That
// LSN is not in SQL, so Run takes a mark: xmin0, the snapshot's xmin, then lsn0, the WAL insert
// position; it waits (at most Options.Wait) until the slot confirms lsn0, then deletes only rows
// whose xmin precedes xmin0. Such a row's transaction committed before the mark, so its commit
// ended at or before lsn0. created_at proves nothing (it is the transaction's start time). A long
// transaction holds xmin0 back and delays pruning; Result.Kept and Result.Holder say so.
// docs/outbox.md has the argument in full, with what xmin wraparound and UPDATEs do.
//
// Deleting is invisible to the relay: the publication is insert-only.
//
// # Contexts and goroutines
//
// Each batch is its own transaction (lowest ids first), so locks stay short and a stopped prune
// leaves a consistent table. Run works on the caller's goroutine and connection and starts none;
// cancelling ctx cancels the statement in flight (the batch rolls back) and Run returns.
package prune
