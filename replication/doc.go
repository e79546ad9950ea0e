// Package replication owns the logical replication connection to PostgreSQL.
//
// # Streaming
//
// A Stream starts pgoutput streaming from a slot (proto_version 1, the configured publications,
// logical messages included; PostgreSQL 14 to 18) and forwards every XLogData and keepalive, in
// server order, to a channel, in batches. It never decides what was delivered: the flush position
// it reports is only ever what the caller passed to Ack, always sent explicitly. Status updates go
// out every StatusInterval, ConfirmDelay after Ack, and whenever the server asks, also while the
// channel is full, so wal_sender_timeout never fires. A session from which nothing arrived for
// ReceiveTimeout ends and is reconnected (DESIGN.md, "A silent server ends the session"). While it
// drains a backlog it reads bigger batches (reader.go; DESIGN.md, "Reading a backlog").
//
// # Reconnects and the slot
//
// When the connection is lost, Run reconnects with backoff and sends a KindReset message: the
// consumer forgets its open transaction, since the server replays from the slot's confirmed
// position. A slot held by another process makes the Stream a standby that retries until it is
// free; a missing or invalidated slot and bad configuration end Run with what to do. The slot's
// name rules, sentinels and query are internal/slotfacts', shared with slotstore.
//
// # Contexts and goroutines
//
// One goroutine owns the connection, the one running Run; the package starts none (Ack's timer
// and a caught-up read's context.AfterFunc only move a read deadline). Ack and the accessors are
// safe from any goroutine. Cancelling Run's ctx ends Run at the next read or send; Close then sends
// the final status and ends the COPY within its own ctx. DESIGN.md's file map names each file.
package replication
