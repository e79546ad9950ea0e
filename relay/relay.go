package relay

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/sink"
)

// Stats are the relay's counters. All fields are read atomically.
type Stats struct {
	Published    atomic.Int64 // records acknowledged on their own topic
	Bytes        atomic.Int64 // value bytes acknowledged on their own topic
	DeadLettered atomic.Int64 // records acknowledged on the dead-letter topic
	BadRows      atomic.Int64 // rows that could not become records (dead-lettered)
	Transactions atomic.Int64 // transactions seen
	// ParkedInTable counts dead letters the dead-letter topic refused too, committed to the
	// PostgreSQL table Config.DeadLetterTable instead.
	ParkedInTable atomic.Int64
	// KafkaOutages counts the times Kafka stopped acknowledging while records were in flight;
	// KafkaProbes the metadata probes sent during those outages (one per backoff cycle).
	KafkaOutages atomic.Int64
	KafkaProbes  atomic.Int64
	// KeyOrderAtRisk counts records acknowledged ahead of the dead letter of an earlier record
	// of their key (deadletter_order.go): the key's order then rests on that letter being parked.
	KeyOrderAtRisk atomic.Int64
}

// Relay publishes outbox events from a replication slot to Kafka.
type Relay struct {
	cfg    Config
	log    *slog.Logger
	stream *replication.Stream
	sink   *sink.Sink
	dec    *decoder.Decoder
	track  *tracker
	dlq    *deadLetters
	build  record.Builder // each event's record, and its refusal before sink sees it (from the sink's config)
	// letters bounds the dead letters not yet parked: when neither destination takes them,
	// reading pauses instead of holding more (DESIGN.md, "Backpressure").
	letters *letterBudget
	// dlqRefusal remembers a refusal of the whole dead-letter topic for dlqRefusalFor.
	dlqRefusal struct {
		sync.Mutex
		err   error
		until time.Time
	}
	table parker // the last-resort destination: PostgreSQL's dead-letter table
	stats Stats
	// maxTxns bounds the transactions the tracker holds: reading pauses at a Begin beyond it
	// (held.go). parts follows the producer's partitions, to say which one holds the position.
	maxTxns int
	parts   *partWatch
	lost    lostSession // lost.go
	// delivery is the delivery guarantee: atLeastOnce, or exactlyOnce and its Kafka transaction.
	delivery delivery
	// msgs and stopped are Run's channel and the end of its goroutines, for sessionLost (on the
	// stream's goroutine, the channel's only sender) to send its mark.
	msgs    chan []replication.Message
	stopped <-chan struct{}
	// shutdown ends ShutdownTimeout after Run's context ends, not with it: what a stop may still
	// wait for (the final flush, an exactly-once commit in flight) ends then (afterStop).
	shutdown context.Context
	// produced numbers the records the pipeline makes past a bad row (its goroutine alone), so
	// that an acknowledgement can tell whether it passed a letter of its key (deadletter_order.go).
	produced uint64
	// onPassed, if set (tests), hears of each record that passed its key's letter.
	onPassed func(k letterKey, letters []heldLetter)
	// reached: the run ended at Config.StopAt (stopat.go).
	reached atomic.Bool
}

// New validates cfg and builds the parts. Nothing is contacted until Run.
func New(cfg Config) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var r *Relay
	cfg.Replication.OnSessionLost = func(cause error) { r.sessionLost(cause) }
	stream, err := replication.New(cfg.Replication)
	if err != nil {
		return nil, err
	}
	dec, err := decoder.New(cfg.Decoder)
	if err != nil {
		return nil, err
	}
	parts := newPartWatch()
	var eos *exactlyOnce
	if eo := cfg.ExactlyOnce; eo != nil {
		// The checkpoint's reader connects as the producer does (seeds, TLS, SASL), and the
		// producer takes the slot's transactional id.
		eos = newExactlyOnce(*eo, cfg.Sink.Brokers, cfg.Sink.Opts)
		tcfg := kafkatxn.Config{Slot: cfg.Replication.Slot, TransactionalID: eo.TransactionalID, TransactionTimeout: eo.TransactionTimeout}
		cfg.Sink.Opts = append(cfg.Sink.Opts[:len(cfg.Sink.Opts):len(cfg.Sink.Opts)], tcfg.ClientOpts()...)
	}
	// A lost session's abort fails even records whose outcome the producer does not know,
	// instead of sending them again after the slot was lost (lost.go). franz-go refuses it
	// with a transactional id, and exactly-once mode needs none: a lost session ends the run,
	// and the next holder's fence keeps what was in flight from landing (exactly.go).
	cfg.Sink.Opts = append(cfg.Sink.Opts[:len(cfg.Sink.Opts):len(cfg.Sink.Opts)], kgo.WithHooks(parts))
	if eos == nil {
		cfg.Sink.Opts = append(cfg.Sink.Opts, kgo.AllowIdempotentProduceCancellation())
	}
	snk, err := sink.New(cfg.Sink)
	if err != nil {
		return nil, err
	}
	r = &Relay{cfg: cfg, log: cfg.Logger, stream: stream, sink: snk, dec: dec, parts: parts}
	if eos != nil {
		// Only a committed checkpoint is confirmed (exactly.go): the tracker's positions say
		// what may go into the next one.
		eos.r, r.delivery = r, eos
		r.track = newTracker(func(pglogrepl.LSN) {})
	} else {
		r.delivery = atLeastOnce{r}
		r.track = newTracker(stream.Ack)
		r.track.beforeConfirm = cfg.BeforeConfirm
	}
	r.dlq = newDeadLetters()
	records, bytes := snk.Limits()
	r.build = record.Builder{CloudEvents: cfg.Sink.CloudEvents, MaxBytes: int64(bytes)}
	r.letters = newLetterBudget(records, bytes, snk.BufferedBoth)
	r.maxTxns = max(2*records, 1)
	deadTbl, err := outbox.ParseTable(cfg.DeadLetterTable) // checked by Validate
	if err != nil {
		return nil, err
	}
	r.table = &deadTable{connCfg: cfg.Replication.Conn, slot: cfg.Replication.Slot,
		table: deadTbl, log: cfg.Logger, written: func() { r.stats.ParkedInTable.Add(1) }}
	cfg.Metrics.SetSource(r)
	return r, nil
}

// Run relays until ctx ends (a clean stop returns nil) or a failure that retrying cannot
// fix. Either way it stops reading, flushes Kafka within ShutdownTimeout, confirms what was
// delivered, and closes both connections.
func (r *Relay) Run(ctx context.Context) error {
	defer r.sink.Close()
	defer r.table.close()
	if err := r.waitForKafka(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	if err := r.delivery.prepare(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	// The stream hands over batches of up to replication.MaxBatch messages.
	msgs := make(chan []replication.Message, max(1, r.cfg.Buffer/replication.MaxBatch))
	shutdown, release := afterStop(ctx, r.cfg.ShutdownTimeout)
	defer release()
	r.shutdown = shutdown
	g, gctx := errgroup.WithContext(ctx)
	r.msgs, r.stopped = msgs, gctx.Done()
	defer context.AfterFunc(gctx, r.lost.stopProducing)()
	g.Go(func() error { return r.stream.Run(gctx, msgs) })
	g.Go(func() error { return r.pipeline(gctx, msgs) })
	g.Go(func() error { return r.deadLetterLoop(gctx) })
	g.Go(func() error { return r.watchKafka(gctx) })
	runErr := g.Wait()
	if errors.Is(runErr, errStopReached) {
		runErr = nil // a clean stop: delivered and confirmed up to StopAt (stopat.go)
	}

	// Shutdown: reading has stopped. Let Kafka acknowledge what it holds, then confirm it, within
	// ShutdownTimeout of the stop (of now, if a failure ended the run).
	fctx := shutdown
	if ctx.Err() == nil {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
		defer cancel()
	}
	runErr = r.delivery.finish(fctx, runErr)
	// The final status gets at least finalStatusTimeout of its own, after Kafka's deadline: a
	// flush or an exactly-once abort that used the whole shutdown timeout (Kafka down) left it
	// none, and the session would end without CopyDone, its last position maybe not taken.
	closeBy := time.Now().Add(finalStatusTimeout)
	if d, ok := fctx.Deadline(); ok && d.After(closeBy) {
		closeBy = d
	}
	cctx, ccancel := context.WithDeadline(context.Background(), closeBy)
	defer ccancel()
	if err := r.stream.Close(cctx); err != nil {
		r.log.Warn("shutdown: final standby status not sent; the next start replays from the previous one", "cause", err)
	}
	if r.Reached() {
		r.log.Info("reached --stop-at-lsn: every transaction committed before it is published and acknowledged, and the slot is confirmed at it",
			"stop_at_lsn", r.cfg.StopAt, "confirmed", r.stream.Flushed())
	}
	r.log.Info("stopped", "confirmed", r.stream.Flushed(), "published", r.stats.Published.Load(), "dead_lettered", r.stats.DeadLettered.Load())
	return runErr
}

// waitForKafka returns once Kafka answers, nil when ctx ends first, and an error only for what
// retrying cannot fix (sink.Permanent). A relay (re)started during a broker outage waits, as the
// running relay does, instead of exiting into its supervisor's growing back-off; it says so at
// every cycle, and /readyz reports it not ready (the stream has not started).
func (r *Relay) waitForKafka(ctx context.Context) error {
	err := retry.Startup.Until(ctx, func(attempt int) error {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.StartupTimeout)
		defer cancel()
		err := r.sink.Ping(pctx)
		if err == nil && attempt > 0 {
			r.log.Info("Kafka answers: starting to read the slot", "waited_cycles", attempt)
		}
		return err
	}, func(err error) bool { return !sink.Permanent(err) }, func(err error, wait time.Duration) {
		r.log.Warn("waiting for Kafka: it is unreachable, so nothing is read from the slot yet; retrying", "retry_in", wait, "cause", err)
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// drain flushes the producer and the dead-letter queue until both are empty. After a record
// failed for good (the relay stops, and the next start replays from before it), the records
// still buffered are aborted instead: delivering them would put later records of a key ahead
// of the failed one, whose replay then comes after them.
func (r *Relay) drain(ctx context.Context) error {
	if r.track.broken.Load() {
		return r.sink.Abort(ctx)
	}
	for {
		if err := r.sink.Flush(ctx); err != nil {
			return err
		}
		if r.dlq.len() == 0 && r.table.len() == 0 {
			return nil
		}
		// A letter left owed by a read that ctx's end cut short (exactlyOnce.held) is queued again, and
		// franz-go's Flush may answer nil after ctx ended when nothing is buffered.
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.produceDeadLetters(ctx); err != nil {
			return err
		}
		if err := r.table.write(ctx, r.parked); err != nil {
			return err
		}
	}
}

// Confirmed returns the position confirmed to PostgreSQL so far.
func (r *Relay) Confirmed() pglogrepl.LSN { return r.stream.Flushed() }

// finalStatusTimeout is the least time the final standby status and CopyDone get at a stop:
// PostgreSQL answers them at once when it is up.
const finalStatusTimeout = 5 * time.Second

// afterStop returns a context that does not end with ctx but d after it, and the func that
// releases it. A stop's deadline runs from the stop: what the stop waits for before the final
// flush (an exactly-once commit whose answers Kafka holds) counts against ShutdownTimeout. A
// timer the stop started may outlive release: it cancels what is canceled already.
func afterStop(ctx context.Context, d time.Duration) (context.Context, func()) {
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(d, cancel) })
	return c, func() { stop(); cancel() }
}
