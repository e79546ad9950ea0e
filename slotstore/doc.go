// Package slotstore manages the lifecycle of the logical replication slot and the publication
// cdc-relay streams from, and inspects them, over a normal (non-replication) *pgx.Conn with SQL
// functions and catalog views. Streaming is package replication's job.
//
// # Guarantees
//
//   - Create is idempotent: it creates the insert-only publication (publish = 'insert') and the
//     pgoutput slot if missing, adds tables a publication lacks, and says what it changed.
//   - Every operation checks before it changes anything (wal_level, the tables, the slot's plugin,
//     privileges); a failed check changed nothing and says what is missing and what to run.
//   - Failures wrap the sentinels in errors.go (errors.Is); an active slot is a *SlotActiveError
//     with the holder's pid. A slot name is only ever a bind parameter; other names are quoted.
//
// # Names
//
// A slot name is [a-z0-9_]{1,63}; a publication name is [a-z_][a-z0-9_$]{0,62}, the same quoted
// and unquoted. These rules, the sentinels and the slot query are internal/slotfacts', shared with
// replication. A table is "schema.table" or "table" (public), each part taken literally.
// identify.go asks the server IDENTIFY_SYSTEM: its system id and timeline.
//
// # Contexts and goroutines
//
// No goroutines; every method takes ctx first and passes it to pgx. Creating a slot waits for the
// server's running transactions: bound it with a deadline if that matters. A Store is owned by one
// goroutine, as its *pgx.Conn is. A Watcher (run's slot metrics) owns a connection of its own,
// reads the slot's status every interval until ctx ends, hands each read to an Observer and logs
// retained-WAL thresholds crossed and a wal_status that became unreserved or lost.
package slotstore
