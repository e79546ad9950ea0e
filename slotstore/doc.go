// Package slotstore manages the lifecycle of the logical replication slot and
// the publication that cdc-relay streams from, and inspects them.
//
// It works over a normal (non-replication) *pgx.Conn with SQL functions and
// catalog views: pg_create_logical_replication_slot, pg_drop_replication_slot,
// CREATE/ALTER/DROP PUBLICATION, pg_replication_slots, pg_publication and
// pg_publication_tables. It never opens a replication connection; streaming is
// the replication package's job.
//
// What it guarantees:
//
//   - Create is idempotent. It creates the insert-only publication
//     (publish = 'insert') if it is missing, adds requested tables an existing
//     publication lacks, and creates the slot with the pgoutput plugin if it is
//     missing. A second Create with the same options changes nothing and says
//     so in its CreateResult.
//   - Every operation checks before it changes anything: wal_level, that the
//     tables exist, the slot's plugin, and the privileges each step needs. When
//     such a check fails, nothing has been changed and the error says what is
//     missing and what to run. (A privilege can still be revoked between the
//     check and the statement; the server's refusal is then reported with
//     ErrPermission too.)
//   - Failures wrap the sentinels in errors.go, so callers branch with
//     errors.Is; an active slot is a *SlotActiveError carrying the holder's pid.
//   - A replication slot name is only ever sent as a bind parameter; publication
//     and table names in DDL are quoted with pgx.Identifier.Sanitize.
//
// Names: a slot name is [a-z0-9_]{1,63} (the server's own rule). A publication
// name is [a-z_][a-z0-9_$]{0,62} (PostgreSQL's unquoted identifier, in ASCII lower
// case), so that it means the same thing quoted and unquoted, in psql and in
// pgoutput's publication_names option. Both rules, the slot's sentinels and the
// query that reads a slot are internal/slotfacts', which replication uses too, so
// the stream and slotstore take the same names and errors.Is works across them. A
// table is "schema.table" or "table" (schema public); each part is taken literally,
// without SQL case folding, as pg_publication_tables shows it.
//
// The dead-letter and marks tables are package deadletters'.
//
// Contexts and goroutines: the package starts no goroutines. Every method takes
// ctx first and passes it to pgx, so cancelling it cancels the statement in flight. Creating a slot waits for the transactions
// running on the server to finish; bound it with a deadline if that matters.
//
// A Store is not safe for concurrent use, because a *pgx.Conn is not: it is
// owned by the goroutine that calls it.
//
// A Watcher (`cdc-relay run`'s slot metrics) owns a connection of its own and reads
// the slot's status on it every interval until its context ends, handing each read
// to an Observer (metrics.Slot) and logging retained-WAL threshold crossings and a
// wal_status that became unreserved or lost.
package slotstore
