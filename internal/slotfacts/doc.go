// Package slotfacts is what replication and slotstore both know about a logical replication
// slot and the names around it, kept once so that the two cannot disagree.
//
// # What it holds
//
//   - the sentinels for a slot that is missing, held, lost or not pgoutput's, and for a
//     publication that does not exist (errors.go): one value each, which the stream wraps and
//     slotstore names once, so errors.Is works across them;
//   - the name rules for slots and publications (names.go);
//   - what a server error says about a slot, by SQLSTATE (sqlstate.go, with pgerrcode), and
//     Code, the SQLSTATE of an error, which deadletters and poller read too;
//   - the one query that reads a slot from pg_replication_slots (lookup.go), over the simple
//     query protocol, the only one a replication connection accepts, so the stream's walsender
//     connection and slotstore's normal one share it.
//
// # Imports, contexts and goroutines
//
// A leaf: it imports no package of this module; replication, slotstore, deadletters, poller and
// outbox (for ErrBadName and MaxIdentLen, which a table name obeys too) import it. It starts no
// goroutines; Lookup takes ctx first and passes it to pgconn.
package slotfacts
