// Package kafkatxn is the Kafka side of exactly-once delivery (`run` and `poll` with
// `--delivery exactly-once`; docs/design/exactly-once.md): a transactional producer that belongs
// to a replication slot, and the checkpoint each of its Kafka transactions carries, so that what
// Kafka committed and where the relay stands are one fact, read back with read_committed.
//
// It is a sibling of sink, not part of it: it wraps a *kgo.Client the caller built (the relay
// adds ClientOpts to sink's, so records, limits and tracing apply unchanged) and imports no relay
// package. sink's producer is idempotent and never transactional, and a client is one or the
// other from its creation, so the two cannot be mixed by accident.
//
// # Guarantees
//
//   - New takes the slot's transactional id (TransactionalID), fencing every earlier producer and
//     aborting what it left open; only then is the checkpoint read (ReadCheckpoint).
//   - Commit writes the checkpoint into the open transaction, flushes and commits: records and
//     checkpoint become visible together or not at all, and it returns once the coordinator wrote
//     the commit markers: a read_committed consumer can read them. A fenced producer gets a
//     *FencedError.
//   - A commit that did not happen wraps ErrNotCommitted; one whose outcome is unknown wraps
//     ErrOutcomeUnknown. Either way the caller confirms nothing and replays from the checkpoint.
//   - Progress says which records a replay skips and which checkpoint the open transaction
//     commits with, split PostgreSQL transactions included. CommitBatch and ReadBatch are the
//     poller's checkpoint (PollKey).
//
// The caller calls Commit only once every record since Begin (or its letter) was acknowledged.
//
// # Contexts and goroutines
//
// New, Commit, Abort and ReadCheckpoint take a ctx that bounds their waits; one ended during
// Commit leaves the outcome unknown. No goroutines of its own: a Producer is used by one goroutine
// between Begin and Commit, and Produce's promises run on franz-go's callback goroutine.
package kafkatxn
