// Package simwal is a scripted walsender for tests: a fake PostgreSQL server on 127.0.0.1 that
// accepts the replication connection the relay's replication.Stream makes, answers its slot
// query and START_REPLICATION, and streams pgoutput (proto_version 1) transactions from an
// in-memory WAL. It records every standby status update it receives and keeps the slot's
// confirmed_flush_lsn as PostgreSQL would, so that a new session starts where the last flush
// the server received left it. Tests script connection drops, keepalives and a slot held by
// another process through Server.Script and Server.HoldSlot.
//
// # Contexts and goroutines
//
// New starts the accept goroutine and, per connection, a session goroutine and its status reader;
// Close stops them all and waits. The package takes no context: a test ends a session with
// Server.Script (drop) or Close.
package simwal
