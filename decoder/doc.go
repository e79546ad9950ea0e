// Package decoder turns pgoutput messages (protocol version 1, messages=true) into outbox events.
//
// The relay's pipeline (package relay) hands every XLogData payload that replication.Stream
// received to Decoder.Decode together with its WALStart; replication and decoder do not import
// each other. Decode answers with an Output saying what the message means for the relay: a
// transaction begins (KindBegin), an outbox event is ready (KindEvent: an INSERT into an outbox
// table, or a transactional pg_logical_emit_message with the configured prefix), the transaction
// ends (KindCommit, carrying the end LSN to confirm once its events are delivered), or nothing to
// publish (KindNone: updates, deletes, truncates, type and origin messages, other tables, other
// prefixes).
//
// # Guarantees
//
//   - Streaming: events come out one by one as their messages arrive. The decoder never holds a
//     transaction's rows; its memory is the relation cache plus one row's scratch space, whatever
//     the size of the transaction.
//   - Every Event and Commit carries the transaction's xid, commit LSN (Begin.FinalLSN) and
//     commit time (UTC), so the caller can group events by transaction without keeping state.
//   - A bad row (NULL or empty key, NULL payload, a mapped column dropped by ALTER TABLE, bad
//     headers, headers that use a name of the record contract such as outbox-id or cdc-lsn, a
//     logical message that is not an outbox event) is never dropped silently: Decode
//     returns the Event as far as it could be read together with a *outbox.RowError, the decoder stays
//     consistent, and the caller dead-letters the row and goes on. outbox.IsBadRow tells the two apart.
//   - Anything else that is wrong is a *ProtocolError (errors.Is(err, ErrProtocol)): a truncated
//     or unknown message, an Insert for a relation id that no Relation message announced, a
//     Commit without Begin. The stream cannot be trusted past it; reconnect and call Reset.
//   - Columns are mapped by name from each Relation message, so ALTER TABLE mid-stream (added,
//     reordered or dropped columns) is followed as soon as the server announces the new shape.
//   - Malformed input never panics (the package is fuzzed); pglogrepl.Parse is not used because
//     it indexes past the end of truncated messages and allocates per column.
//
// # Purity and ownership
//
// The package does no I/O, starts no goroutines and takes no context: it is a state machine
// over bytes. A Decoder is owned by one goroutine (the relay's pipeline goroutine, which takes
// the stream's batches off a channel; not the goroutine that reads the connection) and is not
// safe for concurrent use. Of data, Decode keeps nothing once it returns (the relation cache,
// the interned topic and event type, ids, keys and headers are copies) except Event.Payload of
// the Output it returns, which aliases data: the caller may reuse data once nothing reads that
// Payload (the relay gives a large payload's buffer back to the stream when Kafka has taken the
// record; TestDecodeKeepsNothingOfDataButThePayload).
package decoder
