package poller

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/sink"
)

// Stats are the poller's counters. All fields are read atomically.
type Stats struct {
	Published    atomic.Int64 // rows acknowledged on their own topic and marked published
	DeadLettered atomic.Int64 // rows acknowledged on the dead-letter topic and marked published
	BadRows      atomic.Int64 // rows that could not become records (dead-lettered)
	Cycles       atomic.Int64 // cycles that selected rows (probes and empty polls excluded)
	RolledBack   atomic.Int64 // cycles rolled back (Kafka or PostgreSQL unavailable)
}

// Poller publishes pending outbox rows to Kafka. Its state belongs to the goroutine in Run;
// WatchPending and PendingReady may run beside it.
type Poller struct {
	cfg   Config
	log   *slog.Logger
	tbl   outbox.Table
	sink  *sink.Sink
	pool  *pgxpool.Pool
	stats Stats

	q     *queries     // nil until read; dropped when the table changes under it
	probe bool         // Kafka was found unavailable: probe before touching rows
	eos   *exactlyOnce // nil: at least once

	pendingOK    atomic.Int64 // unix nanos of WatchPending's last successful count
	pendingEvery atomic.Int64 // WatchPending's interval
}

// New validates cfg and builds the parts. Nothing is contacted until Run.
func New(cfg Config) (*Poller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tbl, _ := outbox.ParseTable(cfg.Table) // checked by Validate
	// pgxpool only takes a configuration it parsed: parse the same string, then put the
	// caller's parsed connection (password, timeout) in.
	pcfg, err := pgxpool.ParseConfig(cfg.Conn.ConnString())
	if err != nil {
		// pgconn's parse errors never include the password.
		return nil, fmt.Errorf("poller: bad PostgreSQL URL: %w", err)
	}
	pcfg.ConnConfig = cfg.Conn.Copy()
	if _, ok := pcfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "cdc-relay poll"
	}
	if cfg.ExactlyOnce != nil {
		if _, ok := pcfg.ConnConfig.RuntimeParams[idleInTransaction]; !ok {
			pcfg.ConnConfig.RuntimeParams[idleInTransaction] = strconv.FormatInt(idleInTransactionTimeout.Milliseconds(), 10)
		}
	}
	pcfg.MaxConns, pcfg.MinConns = 2, 0 // the cycles' and WatchPending's
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return nil, fmt.Errorf("poller: configure PostgreSQL pool: %w", err)
	}
	log := cfg.Logger.With("table", tbl.String())
	var eos *exactlyOnce
	if cfg.ExactlyOnce != nil {
		// The checkpoint's reader is a client of its own, with the producer's brokers,
		// security and log but not its transactional id.
		eos = &exactlyOnce{cfg: *cfg.ExactlyOnce, log: log,
			reader: append([]kgo.Opt{kgo.SeedBrokers(cfg.Sink.Brokers...)}, cfg.Sink.Opts...)}
		cfg.Sink.Opts = append(append([]kgo.Opt{}, cfg.Sink.Opts...), eos.cfg.txnConfig().ClientOpts()...)
	}
	snk, err := sink.New(cfg.Sink)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &Poller{cfg: cfg, log: log, tbl: tbl, sink: snk, pool: pool, eos: eos}, nil
}

// Stats returns the live counters.
func (p *Poller) Stats() *Stats { return &p.stats }

// Close closes the Kafka client (records still buffered fail) and the PostgreSQL pool. Run
// closes them when it returns; call Close only for a Poller that is not run. It is
// idempotent.
func (p *Poller) Close() {
	p.sink.Close()
	p.pool.Close()
}

// Check connects to PostgreSQL and Kafka within timeout, reads the table's columns and
// reports a configuration that cannot work (ErrNoTable, ErrMissingColumn) or a service that
// does not answer. It warns when the table has no pending-rows index. With ExactlyOnce it
// then takes the transactional id and reads the checkpoint, within timeout and the
// transaction timeout more (the read waits for transactions open in the checkpoint topic).
func (p *Poller) Check(ctx context.Context, timeout time.Duration) error {
	if err := p.check(ctx, timeout); err != nil || p.eos == nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, timeout+kafkatxn.DefaultTransactionTimeout)
	defer cancel()
	return p.eos.start(sctx, p.sink.Client(), p.tbl.String())
}

func (p *Poller) check(ctx context.Context, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q, err := p.buildQueries(cctx)
	if err != nil {
		return err
	}
	p.q = q
	if !q.hasIndex {
		p.log.Warn("no partial index on the pending rows: every cycle scans the published rows too; create it with `cdc-relay poll --create-index`",
			"index", IndexName(p.cfg.Table))
	}
	return p.sink.Ping(cctx)
}

// Run polls until ctx ends (a clean stop returns nil) or a failure that retrying cannot fix.
// A cycle in progress when ctx ends is finished, within AckTimeout. Then the producer is
// flushed and both connections are closed.
func (p *Poller) Run(ctx context.Context) error {
	defer p.Close()
	defer func() {
		p.log.Info("stopped", "published", p.stats.Published.Load(), "dead_lettered", p.stats.DeadLettered.Load())
	}()
	defer p.abortOpen()
	failures := 0
	for ctx.Err() == nil {
		start := time.Now()
		n, err := p.cycle(ctx)
		var wait time.Duration
		switch {
		case err == nil:
			if failures > 0 {
				p.log.Info("publishing again", "rows", n)
			}
			failures = 0
			if n < p.cfg.Batch {
				wait = p.cfg.Interval - time.Since(start)
			}
		case ctx.Err() != nil:
			return nil
		case !IsRetryable(err):
			return err
		default:
			wait = p.backoff().Delay(failures)
			failures++
			p.log.Warn("cycle failed: rows stay pending", "retry_in", wait.Round(time.Millisecond), "cause", err)
		}
		if wait > 0 {
			retry.Sleep(ctx, wait)
		}
	}
	return nil
}

// backoff is the wait after consecutive failed cycles: Interval doubling, up to MaxBackoff,
// at least 100ms.
func (p *Poller) backoff() retry.Backoff {
	return retry.Backoff{Min: max(p.cfg.Interval, 100*time.Millisecond), Max: p.cfg.MaxBackoff}
}

// pending is one selected row and the record made of it.
type pending struct {
	id      string
	rec     *kgo.Record
	dlq     bool      // rec is already the dead-letter record (a bad row)
	created time.Time // the row's created_at, for the latency metric
}

// buildQueries reads the table's columns and writes the cycle's statements for this poller.
// Exactly-once selects without SKIP LOCKED: there is one poller per table, and the rows a
// fenced or paused predecessor still holds locked (until its PostgreSQL transaction ends) are
// the oldest pending ones, so passing them by would publish later rows of their keys first.
// The wait is bounded: the poller's sessions end a transaction left idle longer than the Kafka
// transaction it belongs to can live (idleInTransactionTimeout), which ends a paused one's.
func (p *Poller) buildQueries(ctx context.Context) (*queries, error) {
	q, err := buildQueries(ctx, p.pool, p.tbl, p.cfg.Columns, p.cfg.Topic, p.cfg.Shard)
	if err != nil || p.eos == nil {
		return q, err
	}
	q.sel = strings.TrimSuffix(q.sel, skipLocked)
	return q, nil
}

// prepare probes Kafka if it was found unavailable, and reads the table's queries if they are
// not known (yet, or since the table changed).
func (p *Poller) prepare(ctx context.Context) error {
	if p.probe {
		pctx, cancel := context.WithTimeout(ctx, p.cfg.ProbeTimeout)
		err := p.sink.Client().Ping(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: probe: %w", ErrUnavailable, err)
		}
		p.probe = false
		p.log.Info("Kafka answers the probe")
	}
	if p.q == nil {
		q, err := p.buildQueries(ctx)
		if err != nil {
			return err
		}
		p.q = q
	}
	if p.eos != nil {
		return p.settle(ctx)
	}
	return nil
}

// cycle runs one transaction and returns how many rows it selected. On any error the
// transaction is rolled back: the rows stay pending.
func (p *Poller) cycle(ctx context.Context) (int, error) {
	if err := p.prepare(ctx); err != nil {
		return 0, err
	}
	return p.publishSelected(ctx, p.selectRows)
}

// publishSelected runs one transaction: the batch sel selects, published and marked
// (publishAndMark). It returns how many rows sel selected; on any error the transaction is
// rolled back.
func (p *Poller) publishSelected(ctx context.Context, sel func(context.Context, pgx.Tx) ([]pending, error)) (int, error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("poller: begin: %w", err)
	}
	// Once rows are selected the cycle runs to its end even if ctx ends, so that rows Kafka
	// acknowledged are marked; AckTimeout bounds it.
	bg := context.WithoutCancel(ctx)
	defer tx.Rollback(bg)

	batch, err := sel(ctx, tx)
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	return len(batch), p.publishAndMark(bg, tx, batch)
}

// publishAndMark publishes a selected batch, waits for Kafka's acknowledgements, then marks
// the rows published and commits tx: the order that makes a crash publish again, never lose.
//
// With ExactlyOnce the batch is one Kafka transaction, committed with the checkpoint that
// names its rows before they are marked; a mark that fails leaves them to the next cycle's
// settle, which marks them before it selects (they are not published again).
func (p *Poller) publishAndMark(bg context.Context, tx pgx.Tx, batch []pending) error {
	p.stats.Cycles.Add(1)
	ids := make([]string, len(batch))
	for i, b := range batch {
		ids[i] = b.id
	}
	if err := p.publish(bg, batch); err != nil {
		p.stats.RolledBack.Add(1)
		return err
	}
	again := "they will be published again"
	if p.eos != nil {
		cctx, cancel := context.WithTimeout(bg, p.cfg.AckTimeout)
		err := p.eos.commit(cctx, p.tbl.String(), ids)
		cancel()
		if err != nil {
			p.stats.RolledBack.Add(1)
			return err
		}
		// Committed: from here on a failed mark is settled before the next select.
		p.eos.unmarked = true
		again = "the next cycle marks them first"
	}
	if p.cfg.BeforeCommit != nil {
		p.cfg.BeforeCommit(len(batch))
	}
	dead := 0
	for _, b := range batch {
		if b.dlq {
			dead++
		}
	}
	uctx, cancel := context.WithTimeout(bg, p.cfg.AckTimeout)
	defer cancel()
	if _, err := tx.Exec(uctx, p.q.upd, ids); err != nil {
		p.dropQueriesOn(err)
		p.stats.RolledBack.Add(1)
		return fmt.Errorf("poller: mark %d rows published: %w (Kafka holds them; %s)", len(batch), err, again)
	}
	if err := tx.Commit(uctx); err != nil {
		p.stats.RolledBack.Add(1)
		return fmt.Errorf("poller: commit: %w (Kafka holds the batch; %s)", err, again)
	}
	if p.eos != nil {
		p.eos.unmarked = false
	}
	p.stats.Published.Add(int64(len(batch) - dead))
	p.stats.DeadLettered.Add(int64(dead))
	return nil
}

// selectRows locks up to Batch pending rows and makes their records.
func (p *Poller) selectRows(ctx context.Context, tx pgx.Tx) ([]pending, error) {
	return p.query(ctx, tx, "pending", p.cfg.Batch, p.q.sel, p.cfg.Batch)
}

// query runs sel, a select of the columns p.q's selects read, and makes its rows' records.
// which names the rows in errors ("pending", "listed"); size is how many there may be.
func (p *Poller) query(ctx context.Context, tx pgx.Tx, which string, size int, sel string, args ...any) ([]pending, error) {
	rows, err := tx.Query(ctx, sel, args...)
	if err != nil {
		p.dropQueriesOn(err)
		return nil, fmt.Errorf("poller: select %s rows: %w", which, err)
	}
	defer rows.Close()
	batch := make([]pending, 0, size)
	for rows.Next() {
		var id, key, topic, evType, headers *string
		var payload []byte
		var created *time.Time
		if err := rows.Scan(&id, &key, &topic, &payload, &evType, &headers, &created); err != nil {
			return nil, fmt.Errorf("poller: read %s row: %w", which, err)
		}
		if id == nil {
			continue // cannot be marked; a NULL id is outside the contract (the id is the primary key)
		}
		pd, err := p.encode(ctx, p.record(*id, key, topic, payload, evType, headers, created))
		if err != nil {
			return nil, err
		}
		batch = append(batch, pd)
	}
	if err := rows.Err(); err != nil {
		p.dropQueriesOn(err)
		return nil, fmt.Errorf("poller: select %s rows: %w", which, err)
	}
	return batch, nil
}

// record maps a row to its record, or to its dead-letter record when the row is bad.
// A NULL payload (nil) is a tombstone with Config.NullPayload's, else a bad row; an empty one
// stays an empty value.
func (p *Poller) record(id string, key, topic *string, payload []byte, evType, headers *string, created *time.Time) pending {
	c := p.cfg.Columns
	ev := outbox.Event{ID: id, Relation: p.tbl.String(), Topic: p.cfg.Topic}
	var bad *outbox.RowError
	setBad := func(col string, err error) {
		if bad == nil {
			bad = &outbox.RowError{Relation: p.tbl.String(), ID: id, Column: col, Err: err}
		}
	}
	// nonEmpty is v, or "" with column col noted bad (errNull or errEmpty) when v is NULL or empty.
	nonEmpty := func(v *string, col string, errNull, errEmpty error) string {
		switch {
		case v == nil:
			setBad(col, errNull)
		case *v == "":
			setBad(col, errEmpty)
		default:
			return *v
		}
		return ""
	}
	ev.AggregateID = nonEmpty(key, c.AggregateID, outbox.ErrNullKey, outbox.ErrEmptyKey)
	if p.cfg.Topic == "" {
		ev.Topic = nonEmpty(topic, c.Topic, outbox.ErrNullTopic, outbox.ErrEmptyTopic)
	}
	ev.Payload, ev.Binary = payload, p.q != nil && p.q.binary
	if payload == nil && !p.cfg.NullPayload.Tombstone() {
		setBad(c.Payload, outbox.ErrNullPayload)
	}
	if evType != nil {
		ev.EventType = *evType
	}
	if headers != nil {
		hs, err := outbox.ParseHeaders([]byte(*headers))
		if err != nil {
			setBad(c.Headers, err)
		}
		ev.Headers = hs
	}
	commitTime := time.Now()
	if created != nil {
		commitTime = *created
	}
	rec := record.NewRecord(ev, record.NewStamp(0, commitTime), p.cfg.Sink.CloudEvents)
	if bad != nil {
		p.stats.BadRows.Add(1)
		p.cfg.Metrics.ProduceError(metrics.ClassBadRow)
		p.log.Error("bad row: dead-lettering it", "outbox_id", id, "cause", bad)
		return pending{id: id, rec: record.DeadLetter(p.cfg.DLQTopic, rec, p.tbl.String(), bad), dlq: true}
	}
	return pending{id: id, rec: rec, created: commitTime}
}

// result is one record's outcome.
type result struct {
	i   int
	rec *kgo.Record
	err error
}

// publish produces the batch and waits until Kafka acknowledged every record, dead-lettering
// those it rejects for good. A batch not acknowledged within AckTimeout means Kafka is
// unavailable: the records still buffered are aborted and the next cycle probes first.
func (p *Poller) publish(ctx context.Context, batch []pending) error {
	deadline := time.Now().Add(p.cfg.AckTimeout)
	// The deadline also bounds Produce's wait for buffer space; a buffered record is never
	// failed by it (sink.Produce).
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if p.eos != nil {
		if err := p.eos.begin(); err != nil {
			return err
		}
	}
	results := make(chan result, len(batch)) // promises never block
	produce := func(i int, rec *kgo.Record) {
		p.sink.Produce(pctx, rec, func(rec *kgo.Record, err error) { results <- result{i, rec, err} })
	}
	for i, b := range batch {
		produce(i, b.rec)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for left := len(batch); left > 0; {
		var r result
		select {
		case r = <-results:
		case <-timer.C:
			p.cfg.Metrics.ProduceError(metrics.ClassBroker)
			return p.abort(ctx, fmt.Errorf("%w: %d of %d records not acknowledged within %s", ErrUnavailable, left, len(batch), p.cfg.AckTimeout))
		}
		// The relay's classification (sink.Classify): a record is dead-lettered only when Kafka
		// refused it on its own, never for a batch refused as too large although its records fit
		// (the topic's limit was lowered while the poller ran); reason names the limit and flag.
		failure, reason := sink.Failure(0), r.err
		if r.err != nil && !batch[r.i].dlq {
			failure, reason = p.sink.Classify(r.rec, r.err)
		}
		switch {
		case r.err == nil:
			left--
			if !batch[r.i].dlq {
				p.cfg.Metrics.Published(len(r.rec.Value), batch[r.i].created)
			}
		case batch[r.i].dlq:
			p.cfg.Metrics.ProduceError(metrics.ClassDeadLetterRefused)
			sink.TraceFailed(r.rec, r.err)
			return p.abort(ctx, fmt.Errorf("%w: %s refused outbox id %s: %w (fix the topic; the row stays pending)",
				ErrDeadLetterRefused, r.rec.Topic, batch[r.i].id, r.err))
		case failure == sink.Refused:
			p.cfg.Metrics.ProduceError(metrics.ClassRejected)
			p.log.Error("Kafka rejected a record for good: dead-lettering it", "topic", r.rec.Topic, "outbox_id", batch[r.i].id, "cause", reason)
			batch[r.i].rec = record.DeadLetter(p.cfg.DLQTopic, r.rec, p.tbl.String(), reason)
			batch[r.i].dlq = true
			produce(r.i, batch[r.i].rec)
		default:
			sink.TraceFailed(r.rec, r.err)
			return p.abort(ctx, fmt.Errorf("poller: record for %s (outbox id %s) not delivered: %w", r.rec.Topic, batch[r.i].id, r.err))
		}
	}
	return nil
}

// abort fails what the producer still holds, so that a rolled-back batch is not delivered
// behind the poller's back later, and makes the next cycle probe Kafka first; it returns
// cause, the failure that made the batch roll back. Records already in flight may still
// land: they are duplicates of rows that stay pending. With ExactlyOnce it aborts the batch's
// transaction instead, and nothing of it is visible to read_committed consumers; a fence it
// meets is returned instead of cause.
func (p *Poller) abort(ctx context.Context, cause error) error {
	p.probe = true
	actx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout+p.cfg.ProbeTimeout)
	defer cancel()
	if p.eos != nil {
		return p.eos.abort(actx, cause)
	}
	if err := p.sink.Client().AbortBufferedRecords(actx); err != nil {
		p.log.Warn("records of the rolled-back batch are still buffered; they may be delivered twice", "cause", err)
	}
	return cause
}

// abortOpen aborts, when Run ends, a Kafka transaction a failed cycle left open, so that it
// does not hold read_committed consumers back until its timeout.
func (p *Poller) abortOpen() {
	if p.eos == nil || p.eos.tx == nil || !p.eos.open {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ProbeTimeout)
	defer cancel()
	_ = p.eos.abort(ctx, nil)
}

// settle readies an exactly-once poller to select: it takes the transactional id and reads
// the checkpoint if that was not done (Check does it) or the producer is spent (with a new
// Kafka client: renewProducer), aborts a transaction a failed cycle left open, reads the
// checkpoint again after a commit whose outcome is unknown, and marks the rows of the newest
// checkpoint if they may be unmarked (on start, after a failed mark). Until the mark succeeds
// no row is selected: rows Kafka committed are never selected again.
func (p *Poller) settle(ctx context.Context) error {
	e := p.eos
	if e.tx != nil && e.tx.Spent() {
		if err := p.renewProducer(); err != nil {
			return err
		}
	}
	if e.tx == nil {
		if err := e.start(ctx, p.sink.Client(), p.tbl.String()); err != nil {
			return err
		}
	}
	// Aborted before a read: an open transaction would hold the read back until its timeout.
	if err := e.closeOpen(ctx); err != nil {
		return err
	}
	if err := e.read(ctx, p.tbl.String()); err != nil {
		return err
	}
	if !e.unmarked {
		return nil
	}
	mctx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout)
	defer cancel()
	tag, err := p.pool.Exec(mctx, p.q.upd, e.last.IDs)
	if err != nil {
		p.dropQueriesOn(err)
		return fmt.Errorf("poller: mark the %d rows of committed batch %d published: %w (no row is selected until they are)", len(e.last.IDs), e.last.Seq, err)
	}
	e.unmarked = false
	if n := tag.RowsAffected(); n > 0 {
		p.log.Info("marked the rows of the last committed batch, which Kafka holds, published", "batch", e.last.Seq, "rows", n)
	}
	return nil
}

// renewProducer replaces the Kafka client of a spent transactional producer (a commit or an
// abort went unanswered: txn.ErrSpent) with a new one. The next settle takes the transactional
// id with it, which aborts what the unanswered request left open, and reads the checkpoint to
// learn whether the commit happened. The spent client cannot take the id back: Kafka may
// refuse its epoch with PRODUCER_FENCED although no other poller has the id, and the poller
// would stop as if one had.
func (p *Poller) renewProducer() error {
	snk, err := sink.New(p.cfg.Sink)
	if err != nil {
		return err
	}
	p.sink.Close()
	p.sink = snk
	e := p.eos
	e.tx, e.open, e.reread = nil, false, true
	p.log.Info("exactly-once: a Kafka transaction's end went unanswered: a new Kafka client takes the transactional id again and reads the checkpoint")
	return nil
}

// dropQueriesOn forgets the prepared statements when err says the table changed.
func (p *Poller) dropQueriesOn(err error) {
	if schemaChanged(err) {
		p.q = nil
	}
}
