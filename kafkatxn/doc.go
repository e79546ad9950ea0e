// Package kafkatxn is the Kafka side of exactly-once delivery (`run --delivery exactly-once`,
// DESIGN.md "Exactly-once"): a transactional producer that belongs to a replication slot, and
// the checkpoint that each of its Kafka transactions carries, so that what Kafka committed
// and where the relay stands are one fact, read back with read_committed.
//
// It lives under sink because it is Kafka and nothing else: it wraps a *kgo.Client that the
// caller built (in the relay, the sink.Sink's client, with ClientOpts added so that the
// records, limits and tracing of package sink apply unchanged), and it imports no other
// package of the relay but the shared pglogrepl.LSN. It is not part of sink itself because
// sink's promise is at-least-once (an idempotent, non-transactional producer), and the two
// must not be mixed by accident: a client is transactional or not from its creation.
//
// What it guarantees:
//
//   - New takes the slot's transactional id (TransactionalID: derived from the slot, the same
//     for every relay of the slot, across restarts and for a standby): InitProducerID fences
//     every earlier producer of that id, and aborts the transaction it left open. Only after
//     that is the checkpoint read (ReadCheckpoint), so no earlier holder can commit behind it.
//   - Commit writes the checkpoint into the open transaction, flushes and commits: the
//     records and the checkpoint become visible to read_committed consumers together, or
//     neither does. A producer another one fenced gets a *FencedError (IsFenced) from Commit
//     or Begin, and nothing of its open transaction is ever visible.
//   - A commit that did not happen returns an error that wraps ErrNotCommitted (a record or
//     the checkpoint failed, or Kafka aborted the transaction on its timeout: the abort that
//     follows succeeds, which is how it differs from a fence); one whose outcome is unknown
//     (the EndTxn answer was lost) wraps ErrOutcomeUnknown. Either way the caller confirms
//     nothing and replays from the checkpoint (read again after an unknown outcome).
//   - A poller (`poll --delivery exactly-once`) uses the same producer with Config.Slot set to
//     PollKey of its transactional id: CommitBatch commits the batch with a Batch checkpoint
//     naming its rows, and ReadBatch reads the newest back, as ReadCheckpoint does a slot's.
//   - Progress, fed the PostgreSQL transactions as they are decoded, says which records a
//     replay skips (a committed Kafka transaction has them) and which checkpoint the open
//     Kafka transaction commits with, a PostgreSQL transaction split across Kafka
//     transactions included.
//
// What it does not do: it does not know which records belong to which PostgreSQL transaction,
// nor whether each record was acknowledged; the caller's tracker must call Commit only when
// every record produced since Begin has been acknowledged (or its dead letter, produced in the
// same transaction, has been), because Kafka commits whatever the transaction holds.
//
// Contexts and goroutines: New, Commit, Abort and ReadCheckpoint take a context that bounds
// their waits; a context ended during Commit leaves the outcome unknown (franz-go's
// EndTransaction warns against canceling it), and the error says so. The package starts no
// goroutines of its own: the client's are franz-go's, started and ended by whoever made it.
// A Producer is used by one goroutine (the relay's pipeline) between Begin and Commit;
// Produce's promises run on franz-go's callback goroutine.
package kafkatxn
