package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
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
	// msgs and stopped are Run's channel and the end of its goroutines, for sessionLost (on the
	// stream's goroutine, the channel's only sender) to send its mark.
	msgs    chan []replication.Message
	stopped <-chan struct{}
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
	// A lost session's abort fails even records whose outcome the producer does not know,
	// instead of sending them again after the slot was lost (lost.go).
	cfg.Sink.Opts = append(cfg.Sink.Opts[:len(cfg.Sink.Opts):len(cfg.Sink.Opts)], kgo.WithHooks(parts), kgo.AllowIdempotentProduceCancellation())
	snk, err := sink.New(cfg.Sink)
	if err != nil {
		return nil, err
	}
	r = &Relay{cfg: cfg, log: cfg.Logger, stream: stream, sink: snk, dec: dec, parts: parts}
	r.track = newTracker(stream.Ack)
	r.track.beforeConfirm = cfg.BeforeConfirm
	r.dlq = newDeadLetters()
	records, bytes := snk.Limits()
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

	// The stream hands over batches of up to replication.MaxBatch messages.
	msgs := make(chan []replication.Message, max(1, r.cfg.Buffer/replication.MaxBatch))
	g, gctx := errgroup.WithContext(ctx)
	r.msgs, r.stopped = msgs, gctx.Done()
	defer context.AfterFunc(gctx, r.lost.stopProducing)()
	g.Go(func() error { return r.stream.Run(gctx, msgs) })
	g.Go(func() error { return r.pipeline(gctx, msgs) })
	g.Go(func() error { return r.deadLetterLoop(gctx) })
	g.Go(func() error { return r.watchKafka(gctx) })
	runErr := g.Wait()

	// Shutdown: reading has stopped. Let Kafka acknowledge what it holds, then confirm it.
	fctx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
	defer cancel()
	if err := r.drain(fctx); err != nil {
		r.log.Error("shutdown: records still unacknowledged; they will be published again on restart", "cause", err, "in_flight", r.sink.Buffered())
	}
	if err := r.stream.Close(fctx); err != nil {
		r.log.Warn("shutdown: final standby status not sent; the next start replays from the previous one", "cause", err)
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
		if err := r.produceDeadLetters(ctx); err != nil {
			return err
		}
		if err := r.table.write(ctx, r.parked); err != nil {
			return err
		}
	}
}

// pipeline decodes messages in server order and produces their events. It owns the decoder
// and the current transaction.
func (r *Relay) pipeline(ctx context.Context, msgs <-chan []replication.Message) error {
	p := pipe{r: r}
	for {
		var batch []replication.Message
		select {
		case <-ctx.Done():
			return nil
		case <-r.track.failCh:
			return r.track.err()
		case batch = <-msgs:
		}
		for i := range batch {
			if err := p.handle(ctx, &batch[i]); err != nil {
				return err
			}
			// A cancel stops the pipeline at once: the record produced last may have failed
			// waiting for buffer space (never buffered), and nothing after it may be produced,
			// or its key would get a gap. Its transaction stays unacknowledged, so the position
			// holds before it (DESIGN.md, "Shutdown"). A failed record stops it the same way.
			if ctx.Err() != nil {
				return nil
			}
			if r.track.broken.Load() {
				return r.track.err()
			}
		}
	}
}

// pipe is the pipeline's state between messages: the open transaction.
type pipe struct {
	r      *Relay
	cur    *txn
	stamp  *sink.Stamp // the current transaction's position headers, formatted once
	losses int64       // the marks of lost sessions passed (lost.go)
}

func (p *pipe) handle(ctx context.Context, m *replication.Message) error {
	r := p.r
	if isLossMark(m) {
		p.losses++
		return nil
	}
	if m.Kind != replication.KindReset && r.lost.discard.Load() {
		return nil // the lost session's: the next session replays it (lost.go)
	}
	switch m.Kind {
	case replication.KindReset:
		if !r.awaitAbort(ctx, p.losses) {
			return nil // stopped while the abort ran
		}
		r.dec.Reset()
		r.track.dropOpen()
		p.cur = nil
	case replication.KindKeepalive:
		if p.cur == nil {
			r.track.idle(m.ServerWALEnd)
		}
	case replication.KindData:
		out, err := r.dec.Decode(m.WALStart, m.Data)
		if err != nil && !outbox.IsBadRow(err) {
			return fmt.Errorf("relay: decode message at %s: %w", m.WALStart, err)
		}
		switch out.Kind {
		case decoder.KindBegin:
			// A record held for good must pause reading, not grow the tracker (held.go).
			if !r.track.hasRoom(r.maxTxns) && !r.waitForRoom(ctx) {
				return nil // stopped while paused: the pipeline checks why after this message
			}
			p.cur = r.track.beginAt(out.CommitTime)
			p.stamp = nil // made at the first event: most transactions a slot sees may have none
			r.stats.Transactions.Add(1)
		case decoder.KindEvent:
			if p.cur == nil {
				return fmt.Errorf("relay: event at %s outside a transaction", m.WALStart)
			}
			if p.stamp == nil {
				p.stamp = sink.NewStamp(out.CommitLSN, out.CommitTime)
			}
			r.produce(ctx, p.cur, p.stamp, out, err)
		case decoder.KindCommit:
			if p.cur != nil {
				r.track.commit(p.cur, out.EndLSN)
			}
			p.cur = nil
		case decoder.KindNone:
			if err != nil {
				// A non-transactional logical message with the outbox prefix: it belongs to no
				// committed transaction, so it is never published, but its content is kept: it is
				// dead-lettered as a bad row, as a transaction of its own that ends at the
				// message's LSN (or, were one open, with that transaction), so the position
				// passes it only once it is parked.
				x := p.cur
				if x == nil {
					x = r.track.begin()
				}
				stamp := sink.NewStamp(out.EndLSN, time.Now()) // no commit time: when the relay read it
				r.produce(ctx, x, stamp, out, err)
				if p.cur == nil {
					r.track.commit(x, out.EndLSN)
				}
			}
		}
	}
	return nil
}

func (r *Relay) produce(ctx context.Context, x *txn, stamp *sink.Stamp, out decoder.Output, badRow error) {
	ev := out.Event
	rec := sink.NewRecord(sink.Event{
		ID: ev.ID, Table: ev.Relation, AggregateID: ev.AggregateID, Topic: ev.Topic, Payload: ev.Payload,
		EventType: ev.EventType, Headers: ev.Headers, Stamp: stamp, CloudEvents: r.cfg.Sink.CloudEvents,
	})
	r.track.add(x) // first: x stays unacknowledged if the wait below is cut short
	if !r.letters.wait(ctx, rec, r.log, r.lost.discard.Load) {
		return // shutdown or a lost session while reading was paused: nothing after this is produced
	}
	if badRow != nil {
		r.stats.BadRows.Add(1)
		r.cfg.Metrics.ProduceError(metrics.ClassBadRow)
		r.log.Error("bad row: dead-lettering it", "lsn", out.CommitLSN, "relation", ev.Relation, "outbox_id", ev.ID, "cause", badRow)
		r.park(deadLetter{rec: sink.DeadLetter(r.cfg.DLQTopic, rec, ev.Relation, badRow), txn: x})
		return
	}
	relation, commitAt := ev.Relation, out.CommitTime
	if err := r.sink.CheckSize(rec); err != nil {
		// Larger than the producer may buffer, with its headers: franz-go would fail it at once,
		// after Produce returned; parked now, it counts against the budget before the next record.
		r.cfg.Metrics.ProduceError(metrics.ClassRejected)
		r.log.Error("Kafka rejected a record for good: dead-lettering it", "topic", rec.Topic, "outbox_id", string(sink.Header(rec, sink.HeaderOutboxID)), "cause", err)
		r.park(deadLetter{rec: sink.DeadLetter(r.cfg.DLQTopic, rec, relation, err), txn: x})
		return
	}
	r.lost.produce.RLock()
	defer r.lost.produce.RUnlock()
	if r.lost.discard.Load() {
		return // the session was lost meanwhile (lost.go); its transaction was forgotten
	}
	pctx := r.lost.produceContext(ctx)
	r.lost.producing.Store(true)
	defer r.lost.producing.Store(false)
	if ctx.Err() != nil {
		return // stopping: nothing after this is produced, x stays unacknowledged (lost.stopProducing)
	}
	r.sink.Produce(pctx, rec, func(rec *kgo.Record, err error) {
		if err == nil {
			r.letters.signal()
			r.stats.Published.Add(1)
			r.stats.Bytes.Add(int64(len(rec.Value)))
			r.cfg.Metrics.Acked(commitAt)
			r.track.done(x)
			return
		}
		failure, err := r.sink.Classify(rec, err) // err: for a refused record, the letter's reason (the limit and the flag)
		if failure == sink.Undelivered && errors.Is(err, kgo.ErrClientClosed) {
			failure = sink.Unbuffered // Run closed the client: the flush ended before Kafka took it
		}
		switch failure {
		case sink.Aborted:
			// Aborted: the session was lost (its transaction was forgotten, the next session
			// replays it), or the relay stops after a failure.
		case sink.Unbuffered:
			// The session's Produce context ended: a stop while a Produce call waited for buffer
			// space (this record never buffered, the session's buffered ones failed with it, and
			// the pipeline produces nothing after it), or a lost session. Or the client closed at
			// the end of Run, the flush timed out. Its transaction stays unacknowledged, so the
			// confirmed position stops before it and the next start replays it.
			sink.TraceFailed(rec, err)
		case sink.Refused:
			r.cfg.Metrics.ProduceError(metrics.ClassRejected)
			r.log.Error("Kafka rejected a record for good: dead-lettering it", "topic", rec.Topic, "outbox_id", string(sink.Header(rec, sink.HeaderOutboxID)), "cause", err)
			r.park(deadLetter{rec: sink.DeadLetter(r.cfg.DLQTopic, rec, relation, err), txn: x})
		default:
			// A producer failure, or a batch refused as too large although this
			// record fits on its own (the topic's limit changed): never confirm past it; the
			// restart replays it, and sizes batches from the topic's limit read anew.
			r.cfg.Metrics.ProduceError(metrics.ClassUndelivered)
			sink.TraceFailed(rec, err)
			r.lost.stopProduce() // nothing buffered after it is sent (lost.go)
			r.track.fail(fmt.Errorf("relay: record for %s (outbox id %s) not delivered: %w", rec.Topic, sink.Header(rec, sink.HeaderOutboxID), err))
		}
	})
}

// deadLetter is a record to park and the transaction it belongs to.
type deadLetter struct {
	rec *kgo.Record
	txn *txn
}

// park queues a dead letter for the dead-letter goroutine and counts it against the
// dead-letter budget until it is parked (acknowledged on the topic or committed in the table).
func (r *Relay) park(dl deadLetter) {
	r.letters.add(dl.rec)
	r.dlq.push(dl)
}

// parked is called once a dead letter is acknowledged on the topic or committed in the table.
func (r *Relay) parked(rec *kgo.Record, x *txn) {
	// Ends the span of a letter committed to the table; one the topic acknowledged ended then.
	sink.TraceParked(rec, r.cfg.DeadLetterTable)
	r.letters.remove(rec)
	r.track.done(x)
}

// deadLetters is the queue between promises (which must not block) and the goroutine that
// produces to the dead-letter topic. It holds at most the records the producer buffered.
type deadLetters struct {
	mu     sync.Mutex
	items  []deadLetter
	signal chan struct{}
}

func newDeadLetters() *deadLetters { return &deadLetters{signal: make(chan struct{}, 1)} }

func (d *deadLetters) push(dl deadLetter) {
	d.mu.Lock()
	d.items = append(d.items, dl)
	d.mu.Unlock()
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

// wake makes the dead-letter goroutine look at its queues.
func (d *deadLetters) wake() {
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

func (d *deadLetters) take() []deadLetter {
	d.mu.Lock()
	defer d.mu.Unlock()
	items := d.items
	d.items = nil
	return items
}

func (d *deadLetters) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.items)
}

func (r *Relay) deadLetterLoop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.dlq.signal:
			if err := r.produceDeadLetters(ctx); err != nil && ctx.Err() == nil {
				return err
			}
			if err := r.table.write(ctx, r.parked); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// produceDeadLetters parks the queued records. A record the dead-letter topic refuses for good
// too goes to the PostgreSQL table (deadTable); any other failure stops the relay without
// confirming past it: nothing is dropped silently. It waits for the abort of a lost session's
// records to end first: a letter is parked even when its session was lost (lost.go).
func (r *Relay) produceDeadLetters(ctx context.Context) error {
	select {
	case <-r.abortRunning():
	case <-ctx.Done():
		return nil
	}
	letters := r.dlq.take()
	sctx, release := r.lost.withSession(ctx)
	var unresolved atomic.Int64 // the letters produced with sctx, and this call
	unresolved.Store(int64(len(letters)) + 1)
	resolved := func() {
		if unresolved.Add(-1) == 0 {
			release()
		}
	}
	defer resolved()
	for _, dl := range letters {
		x := dl.txn
		if refusal := r.dlqTopicRefusal(); refusal != nil {
			// The topic refused the last letter for a reason that holds for every letter: do not
			// wait for franz-go to learn that again (one metadata refresh, 5 s, per letter).
			r.table.push(tableLetter{rec: dl.rec, refusal: refusal, txn: x})
			r.dlq.wake()
			resolved()
			continue
		}
		r.sink.Produce(sctx, dl.rec, func(rec *kgo.Record, err error) {
			defer resolved()
			if errors.Is(err, kgo.ErrAborting) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				// Aborted with the lost session's records, or its request ended by the session's
				// cancel: still owed (lost.go), queued again and produced once the abort ended. Or
				// shutdown while it waited for buffer space: queued again, drain produces it.
				r.dlq.push(deadLetter{rec: rec, txn: x})
				return
			}
			if err != nil {
				r.cfg.Metrics.ProduceError(metrics.ClassDeadLetterRefused)
				if sink.Rejected(err) {
					r.noteDLQRefusal(err)
					r.table.push(tableLetter{rec: rec, refusal: err, txn: x})
					r.dlq.wake()
					return
				}
				sink.TraceFailed(rec, err)
				r.lost.stopProduce()
				r.track.fail(fmt.Errorf("relay: dead-letter topic %s refused outbox id %s: %w (fix the topic; the relay replays from the last confirmed position)",
					rec.Topic, sink.Header(rec, sink.HeaderOutboxID), err))
				return
			}
			r.stats.DeadLettered.Add(1)
			r.parked(rec, x)
		})
	}
	return r.track.err()
}

// dlqRefusalFor is how long a refusal of the whole dead-letter topic (not authorized, missing,
// invalid) sends letters straight to the table before the topic is tried again.
const dlqRefusalFor = 30 * time.Second

func (r *Relay) noteDLQRefusal(err error) {
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.UnknownTopicOrPartition) &&
		!errors.Is(err, kerr.InvalidTopicException) {
		return // a letter too large: the next one may fit
	}
	r.dlqRefusal.Lock()
	r.dlqRefusal.err, r.dlqRefusal.until = err, time.Now().Add(dlqRefusalFor)
	r.dlqRefusal.Unlock()
}

func (r *Relay) dlqTopicRefusal() error {
	r.dlqRefusal.Lock()
	defer r.dlqRefusal.Unlock()
	if time.Now().Before(r.dlqRefusal.until) {
		return r.dlqRefusal.err
	}
	return nil
}

// Confirmed returns the position confirmed to PostgreSQL so far.
func (r *Relay) Confirmed() pglogrepl.LSN { return r.stream.Flushed() }
