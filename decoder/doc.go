// Package decoder turns pgoutput messages (protocol version 1, messages=true) into outbox events.
//
// The relay's pipeline hands every XLogData payload to Decoder.Decode with its WALStart (replication
// and decoder do not import each other). The Output says what the message means: a transaction
// begins (KindBegin), an outbox event is ready (KindEvent: an INSERT into an outbox table, or a
// transactional logical message with the configured prefix), the transaction ends (KindCommit, with
// the end LSN to confirm), or nothing to publish (KindNone).
//
// # Guarantees
//
//   - Streaming: events come out one by one; memory is the relation cache plus one row's scratch
//     space, whatever the transaction's size.
//   - Every event and Commit carries the xid, commit LSN (Begin.FinalLSN) and commit time (UTC).
//   - A bad row (NULL or empty key, NULL payload unless Config.NullPayload is tombstone, a mapped
//     column dropped, bad or reserved headers, a NULL or empty topic template column, a
//     non-outbox logical message) is returned with a *outbox.RowError: dead-letter it and go on.
//   - Anything else is a *ProtocolError (ErrProtocol): the stream cannot be trusted past it;
//     reconnect and call Reset.
//   - Columns are mapped by name from each Relation message, so ALTER TABLE mid-stream is followed.
//   - Malformed input never panics (fuzzed); pglogrepl.Parse is not used, as it indexes past the
//     end of truncated messages.
//
// # Purity and ownership
//
// No I/O, no goroutines, no context: a state machine over bytes, owned by one goroutine (the
// relay's pipeline). Decode keeps nothing of data once it returns except the Payload of the event
// it returns, which aliases data: reuse data once nothing reads that Payload.
package decoder
