// Package replication owns the logical replication connection to PostgreSQL.
//
// A Stream starts pgoutput streaming from a slot (proto_version 1, the configured
// publications, logical decoding messages included: the same request on every PostgreSQL from
// 14, the oldest it accepts, to 18) and forwards every XLogData and
// keepalive, in server order, to a channel. It never decides what has been delivered: the
// flush position it reports to the server is only ever what the caller passed to Ack, and it
// is always sent explicitly (pglogrepl would otherwise copy the write position into a zero
// flush position). Status updates go out every StatusInterval and whenever the server asks,
// also while the channel is full because Kafka is slow, so wal_sender_timeout never fires.
// The heartbeat asks the server to reply; a session from which nothing arrived for
// ReceiveTimeout (a network gone silent with the sockets open) ends and is reconnected
// (DESIGN.md, "A silent server ends the session").
//
// While it drains a backlog (the Begins it reads were committed well before they were sent),
// it reads bigger batches (reader.go; DESIGN.md, "Reading a backlog").
//
// Contexts and goroutines: one goroutine owns the connection, the one running Run; the package
// starts none of its own (Ack arms a timer whose callback only moves a read deadline and
// signals; a caught-up read is ended by a timer and a context.AfterFunc that only move the
// read deadline of the read in progress). Ack and the read-only accessors are safe from any goroutine. Cancelling Run's ctx
// ends Run at the next read or channel send; Close then sends the final status and ends the
// COPY within its own ctx. When the connection is lost, Run reconnects with backoff, sends a
// KindReset message downstream (the consumer must forget any open transaction: the server
// replays from the slot's confirmed position), and resumes. A slot held by another process
// makes the Stream a standby that retries until the slot is free. A missing or invalidated slot
// and configuration errors end Run with an error that says what to do.
//
// Files by subsystem: stream.go (the types and Run's reconnects), session.go (one session's
// handshake), slot.go (the slot read before START_REPLICATION), loop.go (reading and handing
// batches over), status.go (Ack and the standby status: Stream.status is the one place that
// sends it, for one of four reasons), wake.go (the ConfirmDelay wake), close.go (the clean
// stop), reader.go (batches and SO_RCVLOWAT), errors.go (sentinels, IsRetryable).
//
// What it knows of the slot it shares with slotstore through internal/slotfacts: the name
// rules (Config.Validate), the query that reads the slot before each session (the simple
// protocol, which the replication connection takes), what a server error says about the slot,
// and the sentinels, which ErrSlotMissing, ErrSlotActive, ErrSlotLost and ErrWrongPlugin are.
package replication
