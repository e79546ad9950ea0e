package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/record"
)

// exactlyOnce is the delivery of `run --delivery exactly-once`: the pipeline's goroutine owns
// the open Kafka transaction. At a session's first message it takes the slot's transactional
// id, fencing every earlier holder, and only then reads the checkpoint (ready); it feeds
// Progress each Begin, record and Commit, so that a replay drops what a committed transaction
// has; it commits when the pipeline caught up between PostgreSQL transactions (caughtUp) or
// the transaction is due (commitIfDue), once all of it is settled, and only then confirms the
// checkpoint's position (commit). Whatever keeps a transaction from
// committing (a fence, a failed commit or record, a lost session) ends the run unconfirmed: the
// restart fences, reads the checkpoint and replays from the slot, which an in-process replay
// would need a new session and producer epoch for. (DESIGN.md, "Exactly-once")
type exactlyOnce struct {
	r        *Relay
	cfg      ExactlyOnce
	readOpts []kgo.Opt // the checkpoint reader's client: the seeds, TLS and SASL of the sink's

	prod     *kafkatxn.Producer // nil until start
	progress *kafkatxn.Progress
	open     bool        // a Kafka transaction is begun
	began    time.Time   // when it began
	records  int         // records and dead letters produced in it
	timer    *time.Timer // fires when the open Kafka transaction may be due (due)
}

// newExactlyOnce returns the exactly-once delivery of cfg, its relay to be set. The checkpoint's
// reader connects as the producer does (seeds, TLS, SASL): sinkOpts are the sink's options
// before the transactional id's.
func newExactlyOnce(cfg ExactlyOnce, brokers []string, sinkOpts []kgo.Opt) *exactlyOnce {
	return &exactlyOnce{cfg: cfg, readOpts: append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, sinkOpts...)}
}

// prepare creates the checkpoint topic, or checks the one that exists.
func (e *exactlyOnce) prepare(ctx context.Context) error {
	if err := kafkatxn.EnsureCheckpointTopic(ctx, e.r.sink.Client(), e.cfg.CheckpointTopic, -1); err != nil {
		return fmt.Errorf("relay: exactly-once: %w", err)
	}
	return nil
}

// ready starts the session at its first message: the session streams, so the slot is this
// relay's: fence, then read the checkpoint, before anything of it is decoded (DESIGN.md, "Take
// the slot, fence"). A reset comes before a session's handshake (one that never streamed:
// PostgreSQL was away).
func (e *exactlyOnce) ready(ctx context.Context) (bool, error) {
	if e.prod != nil {
		return true, nil
	}
	if err := e.start(ctx); err != nil && ctx.Err() == nil {
		return false, err
	}
	return ctx.Err() == nil, nil
}

// reset ends the run when a session that streamed was lost (see exactlyOnce).
func (e *exactlyOnce) reset() error {
	if e.prod == nil {
		return nil
	}
	if err := e.r.track.err(); err != nil {
		return err
	}
	return errors.New("relay: exactly-once: a new replication session within the run")
}

// produced commits the open Kafka transaction if it is due, inside a PostgreSQL transaction.
func (e *exactlyOnce) produced(ctx context.Context) error { return e.commitIfDue(ctx, true, false) }

// tick commits the open Kafka transaction if it is due, or sets the timer for when it may be.
func (e *exactlyOnce) tick(ctx context.Context, inTxn bool) error {
	return e.commitIfDue(ctx, inTxn, true)
}

// caughtUp commits the open Kafka transaction at once when the pipeline has decoded every
// message the stream handed over, between PostgreSQL transactions: nothing decoded is left to
// join it, and a read_committed consumer would only wait for the interval (DESIGN.md, "A Kafka
// transaction commits as soon as"). The commit runs on the pipeline's goroutine, so what arrives
// meanwhile waits in the stream's queue and goes into the next Kafka transaction, which commits
// as soon as the pipeline is caught up again: the slower the commit or the faster the rows, the
// more each transaction carries, and Interval and MaxRecords stay the bounds under load. Inside
// a PostgreSQL transaction (inTxn) nothing changes: only a split commits part of one.
func (e *exactlyOnce) caughtUp(ctx context.Context, inTxn bool) error {
	if !e.open || inTxn {
		return nil
	}
	return e.commitOpen(ctx)
}

// start takes the slot's transactional id and reads the checkpoint. It runs on the
// pipeline's goroutine at the session's first messages: the slot is this relay's, and nothing
// of the session is decoded yet.
func (e *exactlyOnce) start(ctx context.Context) error {
	r, slot := e.r, e.r.cfg.Replication.Slot
	var prod *kafkatxn.Producer
	err := e.retry(ctx, "taking the slot's transactional id", func() (err error) {
		prod, err = kafkatxn.New(ctx, r.sink.Client(), kafkatxn.Config{Slot: slot, TransactionalID: e.cfg.TransactionalID,
			CheckpointTopic: e.cfg.CheckpointTopic, TransactionTimeout: e.cfg.TransactionTimeout})
		return err
	})
	if err != nil {
		return fmt.Errorf("relay: exactly-once: %w", err)
	}
	var cp kafkatxn.Checkpoint
	var found bool
	err = e.retry(ctx, "reading the checkpoint", func() (err error) {
		cp, found, err = kafkatxn.ReadCheckpoint(ctx, e.readOpts, e.cfg.CheckpointTopic, slot)
		return err
	})
	if err != nil {
		return fmt.Errorf("relay: exactly-once: read the checkpoint of slot %s: %w", slot, err)
	}
	sys := r.stream.System()
	switch {
	case !found:
		cp = kafkatxn.Checkpoint{Slot: slot}
	case cp.SystemID != "" && sys.ID != "" && cp.SystemID != sys.ID:
		// Its LSNs are another cluster's: they say nothing of this one's WAL (E7).
		r.log.Warn("exactly-once: the checkpoint was written for another PostgreSQL cluster: ignoring it, nothing is skipped",
			"checkpoint_system_id", cp.SystemID, "system_id", sys.ID, "checkpoint", cp.Position)
		cp = kafkatxn.Checkpoint{Slot: slot}
	}
	e.prod, e.progress = prod, kafkatxn.NewProgress(cp)
	skips := "nothing (no checkpoint)"
	switch whole, part := fmt.Sprintf("replayed transactions whose commit starts before %s", cp.Position),
		fmt.Sprintf("the first %d records of the transaction committing at %s", cp.Split.Records, cp.Split.LSN); {
	case cp.Position != 0 && cp.Split.Records > 0:
		skips = whole + ", and " + part
	case cp.Position != 0:
		skips = whole
	case cp.Split.Records > 0:
		skips = part
	}
	r.log.Info("exactly-once: took the slot's transactional id (every earlier holder is fenced) and read the checkpoint",
		"delivery", "exactly-once", "transactional_id", prod.TransactionalID(), "checkpoint_topic", e.cfg.CheckpointTopic,
		"checkpoint", cp.Position, "checkpoint_timeline", cp.Timeline, "timeline", sys.Timeline, "slot_confirmed", r.stream.Flushed(), "skips", skips)
	return nil
}

// eosStartBackoff paces retry: 100 ms doubling to 5 s, jittered (a Kafka restart meets
// every relay of the cluster at once).
var eosStartBackoff = retry.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: true}

// retry calls op (New or ReadCheckpoint, named by what) until it succeeds, fails for a
// reason that waiting does not change, or ctx ends. A broker still starting, a partition
// without a leader yet or a transaction coordinator still loading its log (ktxn.Transient)
// passes by itself: the relay waits with back-off and says what it waits for, instead of
// exiting and being restarted into the same wait. A fence, a missing or uncompacted checkpoint
// topic, a checkpoint that does not decode, refused credentials end the run at once.
func (e *exactlyOnce) retry(ctx context.Context, what string, op func() error) error {
	since := time.Now()
	return eosStartBackoff.Until(ctx, func(int) error { return op() }, kafkatxn.Transient, func(err error, wait time.Duration) {
		e.r.log.Warn("exactly-once: "+what+": Kafka is not ready yet, waiting", "cause", err, "retry_in", wait.Round(time.Millisecond),
			"waiting_for", time.Since(since).Round(time.Millisecond))
	})
}

// begin starts a PostgreSQL transaction, named by the start of its commit record, for
// Progress: a replay drops what a committed checkpoint covers (E7).
func (e *exactlyOnce) begin(finalLSN pglogrepl.LSN) { e.progress.Begin(finalLSN) }

// committed ends the PostgreSQL transaction at endLSN for Progress, and commits the Kafka
// transaction if it is due. A transaction that leaves no Kafka transaction open (it had no
// record, a replay skipped it whole, or the commits of its split parts carry all of it) has
// nothing of it, or of any earlier one, outside committed Kafka transactions, so its end is
// confirmed as rule 3 confirms an idle keepalive's WAL end: without it, a split transaction's
// end waited for the next keepalive.
func (e *exactlyOnce) committed(ctx context.Context, endLSN pglogrepl.LSN) error {
	e.progress.Commit(endLSN)
	e.idle(endLSN)
	return e.commitIfDue(ctx, false, false)
}

// record counts the decoder's next record (an event or a bad row) and reports whether to
// produce it: not when a committed Kafka transaction has it already (a replay). One to produce
// is in the open Kafka transaction, which it begins if none is open.
func (e *exactlyOnce) record() (produce bool, err error) {
	if e.progress.Record() {
		return false, nil
	}
	if !e.open {
		if err := e.prod.Begin(); err != nil {
			return false, fmt.Errorf("relay: exactly-once: %w", err)
		}
		e.open, e.began, e.records = true, time.Now(), 0
		if e.timer == nil {
			e.timer = time.NewTimer(e.cfg.Interval)
		} else {
			e.timer.Reset(e.cfg.Interval)
		}
	}
	e.records++
	return true, nil
}

// due fires when the open Kafka transaction may be due; nil when none is open.
func (e *exactlyOnce) due() <-chan time.Time {
	if !e.open {
		return nil
	}
	return e.timer.C
}

// commitIfDue commits the open Kafka transaction if it is due: it holds MaxRecords, or it is
// twice Interval old (inside a PostgreSQL transaction: a split, E6), or Interval old and no
// PostgreSQL transaction is being decoded (inTxn false). Otherwise, when the timer fired
// (fired), it sets the timer for the next of those moments. Between bursts caughtUp commits
// sooner.
func (e *exactlyOnce) commitIfDue(ctx context.Context, inTxn, fired bool) error {
	if !e.open {
		return nil
	}
	age := time.Since(e.began)
	if e.records < e.cfg.MaxRecords && age < 2*e.cfg.Interval && (inTxn || age < e.cfg.Interval) {
		if fired {
			next := e.cfg.Interval - age
			if next <= 0 {
				next = 2*e.cfg.Interval - age
			}
			e.timer.Reset(next)
		}
		return nil
	}
	return e.commitOpen(ctx)
}

// commitOpen commits the open Kafka transaction (commit). A stop while it waits for the records
// is no error: Run's finish commits or aborts.
func (e *exactlyOnce) commitOpen(ctx context.Context) error {
	// Only a wait for the records that the stop cut short is no error (the transaction is still
	// open, and finish ends it). A commit that was sent and failed is one whatever ctx says:
	// its transaction is closed and none of it is committed, and the pipeline, which may still
	// take a batch before it sees the stop, must not confirm an idle keepalive's WAL end past it
	// (the slot would be confirmed past records that the fence had aborted).
	if err := e.commit(ctx); err != nil && (ctx.Err() == nil || !e.open) {
		return err
	}
	return nil
}

// commit commits the open Kafka transaction with the checkpoint of what it carries, once
// every record in it is acknowledged or replaced by its acknowledged dead letter (Kafka commits
// whatever the transaction holds, E8), and then, only then, confirms the checkpoint's Position.
func (e *exactlyOnce) commit(ctx context.Context) error {
	r := e.r
	if err := r.track.awaitSettled(ctx); err != nil {
		return err
	}
	cp := e.progress.Checkpoint()
	sys := r.stream.System()
	cp.SystemID, cp.Timeline = sys.ID, sys.Timeline
	// Not ctx: a commit canceled midway has an unknown outcome. Kafka aborts a transaction
	// open longer than its timeout anyway. But a stop bounds it (r.shutdown): a stop during a
	// commit whose answers Kafka held would keep Run past the shutdown timeout; cut short, its
	// outcome is unknown, and the restart reads the checkpoint to learn it.
	cctx, cancel := context.WithTimeout(r.shutdown, e.cfg.TransactionTimeout)
	defer cancel()
	began := time.Now()
	err := e.prod.Commit(cctx, cp)
	e.open = false
	e.timer.Stop()
	if err != nil {
		r.cfg.Metrics.TxnAborted()
		return fmt.Errorf("relay: exactly-once: commit the Kafka transaction of %d records with checkpoint %s: %w "+
			"(nothing of it is confirmed to PostgreSQL; the restart replays from the slot and skips what the newest committed checkpoint covers)",
			e.records, cp.Position, err)
	}
	r.cfg.Metrics.TxnCommitted(time.Since(began))
	e.progress.Committed(cp)
	if r.cfg.BeforeConfirm != nil {
		r.cfg.BeforeConfirm(cp.Position) // rule 14's crash hook: committed in Kafka, not yet confirmed
	}
	r.stream.Ack(cp.Position)
	return nil
}

// idle is rule 3: a keepalive reached the pipeline between transactions. In exactly-once mode
// its WAL end is confirmed only while no Kafka transaction is open (E5): the tracker may be
// empty while a transaction holds acknowledged records that are not committed yet.
func (e *exactlyOnce) idle(walEnd pglogrepl.LSN) {
	r := e.r
	if !e.open && walEnd != 0 && r.track.inFlight() == 0 && !r.track.broken.Load() {
		r.stream.Ack(walEnd)
	}
}

// finish ends the open Kafka transaction once the pipeline has stopped (on Run's goroutine,
// which owns the producer then). After a clean stop it commits what the transaction carries if
// every record in it is settled (a record whose wait for buffer space the stop cut short never
// is); otherwise, and after any failure, it aborts it. A fence met on the way is what it
// returns: it explains every other failure.
func (e *exactlyOnce) finish(ctx context.Context, runErr error) error {
	r := e.r
	if e.prod == nil || (!e.open && runErr == nil) {
		return runErr
	}
	if runErr == nil && !r.track.broken.Load() {
		if err := r.drain(ctx); err == nil && r.track.settledNow() {
			if err := e.commit(ctx); err != nil {
				return err
			}
			r.log.Info("exactly-once: committed the open Kafka transaction at the stop", "confirmed", r.stream.Flushed())
			return nil
		}
	}
	wasOpen := e.open
	err := e.prod.Abort(ctx)
	e.open = false
	if wasOpen {
		r.cfg.Metrics.TxnAborted()
	}
	switch {
	case kafkatxn.IsFenced(err) && kafkatxn.IsFenced(runErr):
		return runErr
	case kafkatxn.IsFenced(err) && runErr == nil:
		return fmt.Errorf("relay: exactly-once: %w", err)
	case kafkatxn.IsFenced(err):
		return fmt.Errorf("relay: exactly-once: %w (first: %w)", err, runErr)
	case err != nil:
		r.log.Warn("exactly-once: aborting the open Kafka transaction failed: Kafka aborts it at its timeout, or the next holder's fence does; "+
			"nothing of it is visible to read_committed consumers either way", "cause", err)
	case wasOpen:
		r.log.Info("exactly-once: aborted the open Kafka transaction: nothing of it is visible to read_committed consumers, and it replays")
	}
	return runErr
}

// sessionLost is the stream's OnSessionLost in exactly-once mode: the run ends (see exactlyOnce).
func (e *exactlyOnce) sessionLost(cause error) {
	r := e.r
	if cause == nil {
		cause = errors.New("the session ended")
	}
	r.lost.stopProduce() // a Produce waiting for buffer space returns
	r.track.fail(fmt.Errorf("relay: exactly-once: the replication session ended (%w): the relay stops without confirming more; "+
		"its restart takes the slot, fences every earlier producer of the slot's transactional id and reads the checkpoint again", cause))
}

// errStopped is held's answer when the stop (its ctx) cut its read short.
var errStopped = errors.New("relay: stopped before the read ended")

// eosHeldTimeout bounds held's read of a partition.
const eosHeldTimeout = 10 * time.Second

// held ends the run (an error) when the open Kafka transaction holds rec, a record Kafka
// refused for good, before its dead letter is produced (on the dead-letter goroutine). A broker
// may append a produce and answer REQUEST_TIMED_OUT; franz-go retries the batch with the same
// sequence, and a refusal of the retry (an ACL revoked, a limit lowered in between) leaves the
// first append in the transaction (DESIGN.md E8). franz-go then gives the failed batch's
// sequence numbers to the partition's next batch, which Kafka takes for a duplicate of the
// first append: acknowledged, never written. So the record's partition is read from its last
// stable offset to its high watermark for the record itself, written by this producer id and
// epoch (this transaction): found, the transaction must not commit, and the run ends; not
// found, the record gets its letter. Only refused records pay for the read. A read that fails
// ends the run too (the restart replays from the checkpoint): a letter then could be a
// duplicate, and no letter a loss; but a read that a stop cut short (ctx ended) is no failure
// of the run: it returns errStopped, and the letter stays owed.
func (e *exactlyOnce) held(ctx context.Context, rec *kgo.Record) error {
	r := e.r
	rctx, cancel := context.WithTimeout(ctx, eosHeldTimeout)
	defer cancel()
	held, err := e.prod.Holds(rctx, e.readOpts, rec, record.HeaderOutboxID, record.HeaderOutboxTable)
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		// A principal that may write the topic but not read it (Describe and Read) cannot
		// tell: the letter is produced, which may be a second copy, and if the first produce
		// was held, the partition's next record may be lost as its duplicate (ending the run
		// instead would end every restart the same way: the read is refused for ever).
		r.log.Warn("exactly-once: Kafka refused a record, and the relay may not read its topic to see whether the open transaction holds an earlier attempt: "+
			"dead-lettering it, which may show it twice to read_committed consumers and, if Kafka had written it, may lose the partition's next record; grant the relay's principal Describe and Read on the topic to make this exact",
			"topic", rec.Topic, "partition", rec.Partition, "outbox_id", string(record.Header(rec, record.HeaderOutboxID)), "cause", err)
		return nil
	}
	if err != nil && ctx.Err() != nil {
		return errStopped
	}
	if err != nil {
		r.lost.stopProduce()
		err = fmt.Errorf("relay: exactly-once: read %s partition %d for a record Kafka refused (outbox id %s), which the open transaction may hold: %w",
			rec.Topic, rec.Partition, record.Header(rec, record.HeaderOutboxID), err)
		r.track.fail(err)
		return err
	}
	if held {
		// Its first produce is in the transaction, but franz-go, told the batch failed, gave its
		// sequence numbers to the partition's next batch, which Kafka then took for a duplicate
		// of this one: acknowledged, never written. Nothing acknowledged on the partition since can be trusted: the
		// transaction must not commit. The restart replays from the checkpoint.
		r.lost.stopProduce()
		err := fmt.Errorf("relay: exactly-once: Kafka refused a record on a retry (outbox id %s, %s partition %d) whose first produce is in the open transaction, "+
			"and the records produced to that partition after it may have been taken for duplicates of it and dropped: %w "+
			"(the relay stops; its restart replays from the checkpoint)", record.Header(rec, record.HeaderOutboxID), rec.Topic, rec.Partition, kafkatxn.ErrNotCommitted)
		r.track.fail(err)
		return err
	}
	return nil
}
