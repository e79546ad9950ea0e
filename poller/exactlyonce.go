package poller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// ExactlyOnce configures `poll --delivery exactly-once` (DESIGN.md "`poll --delivery
// exactly-once`"): each cycle's batch is one Kafka transaction whose checkpoint (txn.Batch)
// names the batch's rows, committed before the rows are marked published; on start, and after
// a mark that failed, the rows of the newest checkpoint are marked before any row is selected.
// Zero fields take the defaults stated.
type ExactlyOnce struct {
	// TransactionalID is the producer's transactional.id; whoever starts with it fences every
	// earlier producer of it (which then stops with ErrFenced). Default
	// txn.PollTransactionalID(Table): "cdc-relay-poll-<schema>.<table>", with Config.Shard
	// "cdc-relay-poll-<schema>.<table>_s<I>of<N>".
	TransactionalID string
	// CheckpointTopic is the compacted topic of the checkpoints, shared with `run`'s (created
	// by the poller if missing, one partition; refused if it deletes by retention). Default
	// txn.DefaultCheckpointTopic.
	CheckpointTopic string
	// CheckpointReplicas is the replication factor the poller creates the checkpoint topic
	// with. Default -1: the broker's default.replication.factor.
	CheckpointReplicas int16
}

func (e ExactlyOnce) withDefaults(table string, shard *slotstore.Shard) ExactlyOnce {
	id := kafkatxn.PollTransactionalID(table)
	if shard != nil {
		id = shard.Slot(id) // each shard's poller its own producer: they must not fence each other
	}
	e.TransactionalID = cmp.Or(e.TransactionalID, id)
	e.CheckpointTopic = cmp.Or(e.CheckpointTopic, kafkatxn.DefaultCheckpointTopic)
	e.CheckpointReplicas = cmp.Or(e.CheckpointReplicas, -1)
	return e
}

// txnConfig is the transactional producer's configuration: the checkpoint key is the poller's
// (txn.PollKey), the transaction timeout txn's default.
func (e ExactlyOnce) txnConfig() kafkatxn.Config {
	return kafkatxn.Config{Slot: kafkatxn.PollKey(e.TransactionalID), TransactionalID: e.TransactionalID, CheckpointTopic: e.CheckpointTopic}
}

// MaxAckTimeout is the longest Config.AckTimeout exactly-once allows: a batch's Kafka
// transaction waits up to AckTimeout for the acknowledgements and up to AckTimeout more for
// the commit, and must end within the transaction timeout, or Kafka aborts it under the
// poller.
const MaxAckTimeout = kafkatxn.DefaultTransactionTimeout / 2

// idleInTransactionTimeout is the idle_in_transaction_session_timeout of an exactly-once
// poller's PostgreSQL sessions, unless its connection string sets one: a cycle's transaction
// is idle while it waits for Kafka (AckTimeout for the acknowledgements, as long again for the
// commit, MaxAckTimeout at most each), so a transaction idle longer than the Kafka transaction
// timeout belongs to a poller paused past it, whose Kafka transaction Kafka has aborted. Ending
// its session releases the rows it locked, which the holder's select waits for.
const (
	idleInTransaction        = "idle_in_transaction_session_timeout"
	idleInTransactionTimeout = kafkatxn.DefaultTransactionTimeout
)

// exactlyOnce is the poller's Kafka transaction and checkpoint, owned by Run's goroutine.
type exactlyOnce struct {
	cfg    ExactlyOnce
	reader []kgo.Opt // the checkpoint reader's client: seed brokers, security, log
	log    *slog.Logger

	tx   *kafkatxn.Producer // nil until started (Poller.prepare)
	last kafkatxn.Batch     // the newest committed checkpoint; Seq 0 when none was ever written

	unmarked bool // last's rows may be unmarked: mark them before selecting
	reread   bool // a commit's outcome is unknown: read the checkpoint again, then mark it
	open     bool // a Kafka transaction may be open: abort it before the next begins
}

// start creates or checks the checkpoint topic, takes the transactional id (fencing every
// earlier producer of it and aborting what it left open), then reads the newest checkpoint:
// in that order, so that no earlier producer can commit behind the read (DESIGN.md "Take the
// slot, fence").
func (e *exactlyOnce) start(ctx context.Context, cl *kgo.Client, table string) error {
	if err := kafkatxn.EnsureCheckpointTopic(ctx, cl, e.cfg.CheckpointTopic, e.cfg.CheckpointReplicas); err != nil {
		return err
	}
	tx, err := kafkatxn.New(ctx, cl, e.cfg.txnConfig())
	if err != nil {
		return e.fenced(err)
	}
	e.tx = tx
	e.reread = true
	if err := e.read(ctx, table); err != nil {
		return err
	}
	e.log.Info("exactly-once: took the transactional id, read the checkpoint", "transactional_id", e.cfg.TransactionalID,
		"checkpoint_topic", e.cfg.CheckpointTopic, "last_batch", e.last.Seq, "last_batch_rows", len(e.last.IDs))
	return nil
}

// read reads the newest checkpoint when reread is set, and makes its rows the ones to mark.
func (e *exactlyOnce) read(ctx context.Context, table string) error {
	if !e.reread {
		return nil
	}
	b, ok, err := kafkatxn.ReadBatch(ctx, e.reader, e.cfg.CheckpointTopic, kafkatxn.PollKey(e.cfg.TransactionalID))
	if err != nil {
		return fmt.Errorf("%w: read the checkpoint: %w", ErrUnavailable, err)
	}
	if ok && b.Table != table {
		return fmt.Errorf("%w: the checkpoint of transactional id %s names table %s, this poller publishes %s: give each table its own --transactional-id",
			ErrCheckpointOfAnotherTable, e.cfg.TransactionalID, b.Table, table)
	}
	if ok {
		e.last, e.unmarked = b, true
	}
	e.reread = false
	return nil
}

// closeOpen aborts the transaction a failed cycle left open, if it may be.
func (e *exactlyOnce) closeOpen(ctx context.Context) error {
	if !e.open {
		return nil
	}
	if err := e.tx.Abort(ctx); err != nil {
		return e.fenced(fmt.Errorf("%w: abort the Kafka transaction a failed cycle left open: %w", ErrUnavailable, err))
	}
	e.open = false
	return nil
}

// begin opens the batch's transaction (settle closed the one a failure left open).
func (e *exactlyOnce) begin() error {
	if err := e.tx.Begin(); err != nil {
		return e.fenced(err)
	}
	e.open = true
	return nil
}

// commit commits the open transaction with the checkpoint of ids. Only after it returned nil
// may the rows be marked.
func (e *exactlyOnce) commit(ctx context.Context, table string, ids []string) error {
	b := kafkatxn.Batch{Seq: e.last.Seq + 1, Table: table, IDs: ids}
	err := e.tx.CommitBatch(ctx, b)
	switch {
	case err == nil:
		e.last, e.open = b, false
		return nil
	case errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge):
		return fmt.Errorf("%w: the checkpoint of %d rows does not fit %s's max.message.bytes (or --max-buffered-bytes): lower --batch: %w",
			ErrCheckpointTooLarge, len(ids), e.cfg.CheckpointTopic, err)
	case errors.Is(err, kafkatxn.ErrOutcomeUnknown):
		e.reread = true // committed or aborted: the checkpoint says which
	}
	return e.fenced(fmt.Errorf("%w: commit batch %d: %w", ErrUnavailable, b.Seq, err))
}

// abort ends the open transaction after cause made the cycle fail: nothing of it becomes
// visible to read_committed consumers. It returns cause, or the fence the abort met.
func (e *exactlyOnce) abort(ctx context.Context, cause error) error {
	if err := e.tx.Abort(ctx); err != nil {
		if kafkatxn.IsFenced(err) {
			return e.fenced(err)
		}
		e.log.Warn("the failed batch's Kafka transaction is not aborted yet; the next cycle aborts it first (none of it is visible to read_committed consumers)", "cause", err)
		return cause
	}
	e.open = false
	return cause
}

// fenced returns ErrFenced, with the broker's answer, when err says another producer took the
// transactional id, and err otherwise.
func (e *exactlyOnce) fenced(err error) error {
	if !kafkatxn.IsFenced(err) {
		return err
	}
	answer := err
	if fe := (*kafkatxn.FencedError)(nil); errors.As(err, &fe) {
		answer = fe.Err // without the relay's wording of the fence
	}
	return fmt.Errorf("%w (%s): this poller stops; nothing of its open transaction is visible to read_committed consumers, and its rows stay pending for the holder: %w",
		ErrFenced, e.cfg.TransactionalID, answer)
}
