package kafkatxn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultCheckpointTopic is the compacted topic that holds every slot's checkpoint.
const DefaultCheckpointTopic = "cdc-relay-checkpoints"

// DefaultTransactionTimeout is how long Kafka lets a transaction stay open before it aborts it
// (franz-go's default is 40 s). It bounds how long a paused relay's open transaction holds
// back read_committed consumers (the last stable offset) when no new holder fences it. It
// must not exceed the broker's transaction.max.timeout.ms (15 minutes by default).
const DefaultTransactionTimeout = 30 * time.Second

// TransactionalID is the transactional.id of a slot's relays: the same for every relay that
// can hold the slot (a restart, a standby), so that the one that takes it fences the others.
// Two PostgreSQL clusters with slots of the same name that publish to one Kafka cluster must
// not share it: Config.TransactionalID overrides it.
func TransactionalID(slot string) string { return "cdc-relay-" + slot }

// Config configures a Producer. Zero fields take the defaults stated.
type Config struct {
	// Slot names the replication slot whose position the checkpoints carry, and is their key;
	// a poller's producer sets it to PollKey of its transactional id. Required.
	Slot string
	// TransactionalID is the producer's transactional.id. Default TransactionalID(Slot).
	TransactionalID string
	// CheckpointTopic is the compacted topic of the checkpoints (EnsureCheckpointTopic).
	// Default DefaultCheckpointTopic.
	CheckpointTopic string
	// TransactionTimeout is the transaction.timeout.ms of the producer. Default
	// DefaultTransactionTimeout.
	TransactionTimeout time.Duration
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Slot == "" {
		return ErrNoSlot
	}
	if c.TransactionTimeout < 0 {
		return fmt.Errorf("txn: transaction timeout %s is negative", c.TransactionTimeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.TransactionalID == "" {
		c.TransactionalID = TransactionalID(c.Slot)
	}
	if c.CheckpointTopic == "" {
		c.CheckpointTopic = DefaultCheckpointTopic
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = DefaultTransactionTimeout
	}
	return c
}

// MetadataMinAge is the shortest time between two metadata requests of a transactional
// client (franz-go's default is 5 s). Under KIP-890 a transaction's first produce to a
// partition makes the partition's leader add it to the transaction, and while the coordinator
// still writes the previous transaction's markers that answers CONCURRENT_TRANSACTIONS; the
// broker retries for up to add.partitions.to.txn.retry.backoff.max.ms (100 ms) and then returns
// it. franz-go retries such a batch only after a metadata refresh, which waits out the minimum
// age since the last one: the partition, and the commit that waits for its records, stalled
// for up to 5 s (p99 4.1 s at 500 rows/s on a loaded machine). A refresh costs one small
// request to one broker; a partition that stays in error is asked about ten times a second.
const MetadataMinAge = 100 * time.Millisecond

// ClientOpts are the options the Kafka client that New wraps must be built with (add them to
// sink.Config.Opts, after the sink's own).
func (c Config) ClientOpts() []kgo.Opt {
	c = c.withDefaults()
	return []kgo.Opt{
		kgo.TransactionalID(c.TransactionalID),
		kgo.TransactionTimeout(c.TransactionTimeout),
		kgo.MetadataMinAge(MetadataMinAge),
		kgo.WithHooks(&loadWatch{}),
	}
}

// Producer is a slot's transactional producer: Begin, Produce, Commit (or Abort), again.
// It is owned by one goroutine (the relay's pipeline); Produce's promises run on franz-go's.
type Producer struct {
	cl    *kgo.Client
	loads *loadWatch // the partitions the client does not list yet (loaded.go)
	cfg   Config
	fence error // the *FencedError once one was met: every later call returns it
	spent bool  // an EndTxn went unanswered: Begin and Commit return ErrSpent (errors.go)

	noDescribe bool // the broker refused to describe the transaction: commits do not await its markers (completed.go)
}

// New takes the slot's transactional id with cl (built with cfg.ClientOpts): the
// InitProducerID it sends fences every earlier producer of the id, and Kafka aborts the
// transaction such a producer left open before it answers. Read the checkpoint
// (ReadCheckpoint) only after New returns: before it, a paused holder could still commit.
// A fence at this point (a newer producer took the id while this one started) is a
// *FencedError. New does not close cl on error.
func New(ctx context.Context, cl *kgo.Client, cfg Config) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	id, _ := cl.OptValue(kgo.TransactionalID).(string)
	if id == "" {
		return nil, errors.New("txn: the Kafka client has no transactional id: build it with Config.ClientOpts")
	}
	if id != cfg.TransactionalID {
		return nil, fmt.Errorf("txn: the Kafka client's transactional id is %q, the slot's is %q: build the client with Config.ClientOpts", id, cfg.TransactionalID)
	}
	cfg.TransactionalID = id
	loads := findLoadWatch(cl)
	if loads == nil {
		return nil, errors.New("txn: the Kafka client lacks the producer's hook: build it with Config.ClientOpts")
	}
	loads.cl = cl
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return nil, fmt.Errorf("txn: take transactional id %s: %w", id, fenced(id, err))
	}
	return &Producer{cl: cl, loads: loads, cfg: cfg}, nil
}

// Client is the wrapped client.
func (p *Producer) Client() *kgo.Client { return p.cl }

// TransactionalID is the producer's transactional.id.
func (p *Producer) TransactionalID() string { return p.cfg.TransactionalID }

// Spent reports whether an EndTxn of this producer (a commit or an abort) went unanswered:
// its Begin and Commit return ErrSpent, and the caller makes a new Producer on a new client.
func (p *Producer) Spent() bool { return p.spent }

// usable is the error every call but Abort returns once the producer is fenced or spent.
func (p *Producer) usable() error {
	switch {
	case p.fence != nil:
		return p.fence
	case p.spent:
		return ErrSpent
	}
	return nil
}

// Begin opens a transaction. A producer that was fenced gets a *FencedError; one that is
// spent (Spent) gets ErrSpent.
func (p *Producer) Begin() error {
	if err := p.usable(); err != nil {
		return err
	}
	if err := p.cl.BeginTransaction(); err != nil {
		return p.fatal(fmt.Errorf("txn: begin: %w", fenced(p.cfg.TransactionalID, err)))
	}
	return nil
}

// fatal remembers err when it is a fence: a fenced producer stays fenced (franz-go keeps the
// failed transaction open in the client, and a later Begin would say only "already in a
// transaction").
func (p *Producer) fatal(err error) error {
	if p.fence == nil && IsFenced(err) {
		p.fence = err
	}
	return err
}

// Produce buffers r in the open transaction; promise runs when Kafka acknowledged or refused
// it. A refused record is not in the transaction, and Commit would commit the others without
// it: the caller commits only once its dead letter, produced in the same transaction, was
// acknowledged (or aborts). ctx bounds only the wait for buffer space, as
// kgo.Client.Produce's does.
func (p *Producer) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	p.cl.Produce(ctx, r, promise)
}

// Commit writes cp into the open transaction, waits for every record of the transaction to be
// acknowledged (Flush), commits, and waits until the coordinator wrote the commit markers
// (completed.go). Call it only when every record produced since Begin was
// acknowledged or replaced by its dead letter: Kafka commits whatever the transaction holds.
//
// Errors, each with what the caller does (DESIGN.md, "The position confirmed"):
//   - a *FencedError (IsFenced): another relay holds the slot; nothing of the transaction is
//     visible; stop.
//   - ErrNotCommitted: the transaction was aborted (a record or the checkpoint failed, the
//     coordinator aborted it on its timeout) and nothing of it is visible; replay it from the
//     last committed checkpoint.
//   - ErrOutcomeUnknown: the commit was sent and its answer lost; the transaction is aborted
//     if it was not committed; read the checkpoint again to know which, and replay from it.
//     The producer is spent (Spent): make a new one on a new client first (ErrSpent).
//   - anything else (a checkpoint that does not validate): nothing was sent, the transaction
//     is still open.
func (p *Producer) Commit(ctx context.Context, cp Checkpoint) error {
	if err := p.usable(); err != nil {
		return err
	}
	return p.fatal(p.commit(ctx, cp))
}

func (p *Producer) commit(ctx context.Context, cp Checkpoint) error {
	if cp.Slot != p.cfg.Slot {
		return fmt.Errorf("txn: checkpoint of slot %q given to the producer of slot %q", cp.Slot, p.cfg.Slot)
	}
	rec, err := p.checkpointRecord(cp)
	if err != nil {
		return err
	}
	return p.commitRecord(ctx, rec, cp.Position.String())
}

// produceWithin produces rec and waits for its outcome until ctx ends. franz-go's ProduceSync
// waits for an answer Kafka holds even once the record's context ended (a record in flight can
// fail only with its request, and that request may be another record's), so a stop during a
// commit waited as long as Kafka held the answer, past the relay's shutdown timeout. Its
// promise may come later.
func produceWithin(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	done := make(chan error, 1)
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer before the deadline: %w", context.Cause(ctx))
	}
}

// commitRecord writes the checkpoint record rec (what names it in errors) into the open
// transaction, flushes and commits: Commit's work once its checkpoint is encoded.
func (p *Producer) commitRecord(ctx context.Context, rec *kgo.Record, what string) error {
	if err := produceWithin(ctx, p.cl, rec); err != nil {
		return p.abortAfter(ctx, fmt.Errorf("txn: write checkpoint %s to %s: %w", what, p.cfg.CheckpointTopic, err))
	}
	if err := p.cl.Flush(ctx); err != nil {
		return p.abortAfter(ctx, fmt.Errorf("txn: flush before commit: %w", err))
	}
	p.loads.await(ctx) // the commit bumps the epoch: every partition written must be listed (loaded.go)
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		id := p.cfg.TransactionalID
		if IsFenced(err) {
			return fmt.Errorf("txn: commit: %w", fenced(id, err))
		}
		if errors.Is(err, kerr.OperationNotAttempted) {
			// The producer id failed before the commit was sent (a produce fenced or failed
			// it): nothing was committed. Abort, which surfaces the fence if it was one.
			return p.abortAfter(ctx, fmt.Errorf("txn: commit not attempted: %w", err))
		}
		// Per franz-go's EndTransaction: an unconfirmed outcome is retried with TryAbort,
		// which reloads the producer id and fence-aborts anything still open. Whatever the
		// abort says, the producer is spent: the reload may never have reached Kafka, and a
		// later one can meet a fence that no other producer caused (ErrSpent).
		p.spent = true
		abortErr := p.cl.EndTransaction(ctx, kgo.TryAbort)
		if IsFenced(abortErr) {
			return fmt.Errorf("txn: commit: %w", fenced(id, abortErr))
		}
		return fmt.Errorf("txn: commit: %w: %w (then abort: %v)", ErrOutcomeUnknown, err, abortErr)
	}
	p.awaitCompleted(ctx) // the next transaction is added to its partitions at once (completed.go)
	return nil
}

// checkpointRecord is cp's record in the checkpoint topic, keyed by the slot.
func (p *Producer) checkpointRecord(cp Checkpoint) (*kgo.Record, error) {
	value, err := cp.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: p.cfg.CheckpointTopic, Key: []byte(cp.Slot), Value: value}, nil
}

// abortAfter aborts the open transaction after cause, which kept it from committing. It
// returns cause as a fence when it or the abort met one, and wrapped in ErrNotCommitted
// otherwise (an abort that failed leaves the transaction to its timeout or the next holder's
// fence: it is never committed either).
func (p *Producer) abortAfter(ctx context.Context, cause error) error {
	cause = fenced(p.cfg.TransactionalID, cause)
	if IsFenced(cause) {
		_ = p.abort(ctx) // fenced: Kafka aborted it already; this clears the client's state
		return cause
	}
	err := p.abort(ctx)
	switch {
	case err == nil:
		// A transaction the coordinator aborted on its timeout shows the same way (a produce
		// refused INVALID_PRODUCER_EPOCH), but the abort then succeeds: not a fence.
		return fmt.Errorf("%w: %w", ErrNotCommitted, cause)
	case IsFenced(err):
		// The usual way a fence shows: a produce at the old epoch fails with
		// INVALID_PRODUCER_EPOCH, and the abort that follows meets PRODUCER_FENCED.
		return fmt.Errorf("%w (first: %v)", err, cause)
	default:
		return fmt.Errorf("%w: %w (then abort: %v)", ErrNotCommitted, cause, err)
	}
}

// Abort drops what the open transaction buffers and aborts it: none of its records become
// visible to read_committed consumers. A fence is a *FencedError. A spent producer's Abort
// does nothing and returns nil: what the unanswered EndTxn left open is aborted by the next
// producer's New (or by Kafka at the transaction timeout).
func (p *Producer) Abort(ctx context.Context) error {
	switch {
	case p.fence != nil:
		return p.fence
	case p.spent:
		return nil
	}
	return p.fatal(p.abort(ctx))
}

func (p *Producer) abort(ctx context.Context) error {
	if err := p.cl.AbortBufferedRecords(ctx); err != nil {
		return fmt.Errorf("txn: abort buffered records: %w", err)
	}
	p.loads.await(ctx) // as a commit does (loaded.go)
	if err := p.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		err = fenced(p.cfg.TransactionalID, err)
		if !IsFenced(err) {
			p.spent = true // the abort may have reached Kafka and bumped the epoch (ErrSpent)
		}
		return fmt.Errorf("txn: abort: %w", err)
	}
	return nil
}
