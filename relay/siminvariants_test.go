package relay

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/testkit/simwal"
)

// The simulation's invariants (sim_test.go runs them):
//
//	(a) every flush position the walsender receives is at or before the commit LSN of the
//	    first committed transaction with a record on neither its topic nor the dead-letter
//	    topic nor the table (checked when the flush arrives, against Kafka at that moment);
//	(b) after the final run every committed row is on its topic or, only if it is bad, too
//	    large on its own, or hit by an injected for-good fault, dead-lettered with dlq-error;
//	(c) per topic and key, first deliveries follow commit order (the rows' WAL positions) across
//	    restarts;
//	(d) no valid record is dead-lettered (except those an injected for-good fault refused);
//	(e) the dead letters the relay holds (its letterBudget: queued for or in flight to the
//	    dead-letter topic, or waiting for the table) never pass the producer's MaxBufferedRecords
//	    / MaxBufferedBytes, except one letter alone, larger than the byte limit by itself;
//	(f) an idle relay sends no more than its heartbeat status updates;
//	(g) Run returns nil on a cancel unless a fault that must stop the relay was injected;
//	(h) no record carries a header of the record contract twice (a row header named like one is
//	    a bad row, dead-lettered with the reason);
//	(i) a run that ends with Run returning ends its replication session with CopyDone, and the
//	    slot is then exactly at the relay's Confirmed() (the final status counts);
//	(j) the tracker never holds more than the relay's maxTxns transactions (twice
//	    MaxBufferedRecords): a record held for good pauses reading instead of growing it, and a
//	    record too large with its headers is dead-lettered with a reason naming the flag;
//	(k) a session whose network went silent (sockets open) leaves the streaming state within
//	    ReceiveTimeout (plus slack for a loaded machine);
//	(l) once the relay lost the slot to another process (its session ended and the slot was
//	    taken), no record it produced before the loss lands after the next holder's first record
//	    of its partition (one already on its way when the abort began may land after the abort
//	    ended: nothing recalls it), and it produces no record for a topic from the abort's start
//	    until its next session (lostHook sees every record the producer buffers; letters for
//	    the dead-letter topic are owed and allowed);
//
// Records are identified by (outbox-table, outbox-id), as consumers dedupe them: in two-table
// schedules public.outbox and other.outbox have the same ids.

// kafkaIndex reads every record of the simulation's topics from kfake.
type kafkaIndex struct {
	mu     chanMutex // held across a fetch: a sync.Mutex waiter would stop a synctest bubble's clock
	cl     *kgo.Client
	adm    *kadm.Client
	topics []string
	next   map[string]map[int32]int64 // next offset to read per partition
	recs   []seenRec                  // per partition in offset order
	byID   map[string][]int           // by ref: outbox-table "/" outbox-id
	dups   []string                   // (h): records with a contract header twice
	parked int                        // the first committed transactions whose every record safeBound found parked

	brokers []string  // for reopen
	opts    []kgo.Opt // the harness's (its in-memory dialer), and the mode's
	// mode says what the index reads (indexMode); eos holds what it reads beyond records in
	// the read_committed and raw modes (vsimeos_test.go).
	mode indexMode
	eos  eosIndex
	// stalls says, for each reopen, which partitions the consumer had stopped reading
	// (what and from where), so that a run shows when its stall happened.
	stalls []string
}

type seenRec struct {
	ts      time.Time // the record's timestamp: when the relay produced it
	topic   string
	part    int32
	off     int64
	key     string
	id      string // the ref: outbox-table "/" outbox-id
	dlqErr  string
	dlqFrom string
	pid     int64 // the producer's id and epoch (exactly-once: invariant x4)
	epoch   int16
}

func newKafkaIndex(mode indexMode, brokers, topics []string, opts ...kgo.Opt) (*kafkaIndex, error) {
	opts = append(slices.Clip(opts), mode.opts()...)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(20 * time.Millisecond), kgo.KeepControlRecords()}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &kafkaIndex{mu: make(chanMutex, 1), cl: cl, adm: kadm.NewClient(cl), topics: topics, next: map[string]map[int32]int64{}, byID: map[string][]int{},
		brokers: brokers, opts: opts, mode: mode}, nil
}

// reopen replaces the index's consumer with a new one that goes on from what was read. A
// consumer that has not caught up within refresh's timeout is the harness's, not the relay's:
// one run in a few thousand, depending on the goroutine interleaving, a consumer stopped
// fetching a partition that had records (seeds 9462, 2685, 1425, 2295 once each).
func (k *kafkaIndex) reopen() error {
	parts := map[string]map[int32]kgo.Offset{}
	for _, t := range k.topics {
		parts[t] = map[int32]kgo.Offset{}
	}
	ends, err := k.adm.ListEndOffsets(context.Background(), k.topics...)
	if err != nil {
		return err
	}
	ends.Each(func(o kadm.ListedOffset) {
		parts[o.Topic][o.Partition] = kgo.NewOffset().At(k.next[o.Topic][o.Partition])
	})
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.brokers...), kgo.ConsumePartitions(parts),
		kgo.FetchMaxWait(20 * time.Millisecond), kgo.KeepControlRecords()}, k.opts...)...)
	if err != nil {
		return err
	}
	k.cl.Close()
	k.cl, k.adm = cl, kadm.NewClient(cl)
	return nil
}

func (k *kafkaIndex) close() { k.cl.Close() }

// refresh reads everything up to the end offsets of now.
func (k *kafkaIndex) refresh() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := k.ends(ctx)
	if err != nil {
		return err
	}
	behind := func() bool {
		caught := true
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > k.next[o.Topic][o.Partition] {
				caught = false
			}
		})
		return !caught
	}
	for stalls := 0; behind(); {
		// A poll that gets nothing for 10 s: the consumer stalled (reopen says when).
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		fs := k.cl.PollFetches(pctx)
		stalled := pctx.Err() != nil
		pcancel()
		if stalled {
			k.stalls = append(k.stalls, k.behindAt(ends))
			if stalls++; stalls > 2 || ctx.Err() != nil {
				return fmt.Errorf("reading Kafka: %w (%s)", context.DeadlineExceeded, strings.Join(k.stalls, "; "))
			}
			if err := k.reopen(); err != nil {
				return fmt.Errorf("reading Kafka: %w", err)
			}
			continue
		}
		fs.EachRecord(func(r *kgo.Record) {
			if k.next[r.Topic] == nil {
				k.next[r.Topic] = map[int32]int64{}
			}
			k.next[r.Topic][r.Partition] = r.Offset + 1
			if k.mode != indexPlain && k.eosRecord(r) {
				return // a transaction's marker or a checkpoint
			}
			if r.Attrs.IsControl() {
				return // a transaction's marker, last at the end offset after a commit: read, not a record
			}
			s := seenRec{ts: r.Timestamp, topic: r.Topic, part: r.Partition, off: r.Offset, key: string(r.Key),
				id: string(record.Header(r, record.HeaderOutboxTable)) + "/" + string(record.Header(r, record.HeaderOutboxID)), dlqErr: string(record.Header(r, record.HeaderDLQError)),
				dlqFrom: string(record.Header(r, record.HeaderDLQTopic)), pid: r.ProducerID, epoch: r.ProducerEpoch}
			if d := dupContractHeaders(r); d != "" && len(k.dups) < 10 {
				k.dups = append(k.dups, fmt.Sprintf("%s[%d] offset %d (%s): %s", r.Topic, r.Partition, r.Offset, s.id, d))
			}
			k.byID[s.id] = append(k.byID[s.id], len(k.recs))
			k.recs = append(k.recs, s)
		})
	}
	return nil
}

// behindAt names the partitions whose end offset is past what the index read, with both.
func (k *kafkaIndex) behindAt(ends kadm.ListedOffsets) string {
	var behind []string
	ends.Each(func(o kadm.ListedOffset) {
		if next := k.next[o.Topic][o.Partition]; o.Offset > next {
			behind = append(behind, fmt.Sprintf("%s[%d] at %d of %d", o.Topic, o.Partition, next, o.Offset))
		}
	})
	slices.Sort(behind)
	return "stalled on " + strings.Join(behind, ", ")
}

// dupContractHeaders names the record-contract headers (record.ReservedHeader, ASCII case
// ignored) that r carries more than once, "" when none.
func dupContractHeaders(r *kgo.Record) string {
	n := map[string]int{}
	var dup []string
	for _, h := range r.Headers {
		if !record.ReservedHeader(h.Key) {
			continue
		}
		k := strings.ToLower(h.Key)
		if n[k]++; n[k] == 2 {
			dup = append(dup, k)
		}
	}
	if dup == nil {
		return ""
	}
	var all []string
	for _, h := range r.Headers {
		all = append(all, h.Key+"="+string(h.Value))
	}
	return fmt.Sprintf("%q twice among %q", dup, all)
}

// where reports whether the record ref (outbox-table "/" outbox-id) is on topic and whether it is dead-lettered (topic or table).
func (h *harness) where(id string, topic string, table map[string][]string) (onTopic, dead bool) {
	for _, i := range h.idx.byID[id] {
		r := h.idx.recs[i]
		switch {
		case r.topic == simDLQ && r.dlqErr != "":
			dead = true
		case topic != "" && r.topic == topic:
			onTopic = true
		}
	}
	return onTopic, dead || len(table[id]) > 0
}

func (h *harness) tableIDs() map[string][]string {
	m := map[string][]string{}
	for _, r := range h.store.all() {
		id := string(record.Header(r, record.HeaderOutboxTable)) + "/" + string(record.Header(r, record.HeaderOutboxID))
		m[id] = append(m[id], string(record.Header(r, record.HeaderDLQError)))
	}
	return m
}

// safeBound is the highest position that may be confirmed now: the commit LSN of the first
// transaction with a record parked nowhere, or no bound. It reads the index as it is. What
// Kafka and the table hold only grows, so the transactions found parked once are not looked
// at again (kafkaIndex.parked).
func (h *harness) safeBound(committed []committedTxn) (pglogrepl.LSN, string) {
	table := h.tableIDs()
	h.idx.mu.Lock()
	defer h.idx.mu.Unlock()
	for i := min(h.idx.parked, len(committed)); i < len(committed); i++ {
		c := committed[i]
		for _, r := range c.rows {
			id := r.ref()
			if on, dead := h.where(id, r.topic, table); !on && !dead {
				return c.txn.CommitLSN, fmt.Sprintf("transaction %d (xid %d, commit %s, end %s): outbox id %s (%s, key %s, topic %q) is on neither its topic nor the dead-letter topic nor the table",
					i, c.txn.Xid, c.txn.CommitLSN, c.txn.EndLSN, id, r.class, r.key, r.topic)
			}
		}
		h.idx.parked = i + 1
	}
	return math.MaxUint64, ""
}

// checkFlush is invariant (a), run by the walsender as each status update arrives.
func (h *harness) checkFlush(st simwal.Status) {
	h.mu.Lock()
	if uint64(st.Flush) <= h.okFlush {
		h.mu.Unlock()
		return
	}
	committed := h.committed
	h.mu.Unlock()
	if h.eos != nil {
		h.checkCovered(st.Session, st.Flush)
	}
	bound, why := h.safeBound(committed)
	if st.Flush > bound {
		if err := h.idx.refresh(); err != nil {
			h.violate("a", "cannot read Kafka to check flush %s: %v", st.Flush, err)
			return
		}
		bound, why = h.safeBound(committed)
	}
	if st.Flush > bound {
		h.violate("a", "session %d confirmed %s past undelivered %s", st.Session, st.Flush, why)
		return
	}
	h.mu.Lock()
	h.okFlush = max(h.okFlush, uint64(st.Flush))
	h.mu.Unlock()
}

// simMemFactor scales the producer's limits for invariant (e): 1 holds the dead-letter queues to
// MaxBufferedRecords / MaxBufferedBytes themselves.
const simMemFactor = 1

type memSample struct {
	records, bytes int
}

// sample is invariant (e): it reads the relay's own dead-letter accounting (letterBudget.held)
// every h.samplePeriod() until stopped. The relay lets a letter through when none is held, so one
// letter alone may be larger than the byte limit.
func (h *harness) sample(r *Relay) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	// The pipeline holds one record beyond the limits at most: one that passed the budget
	// while no letter was held and then waited inside Produce for buffer space, and failed
	// once the records ahead of it had failed too.
	largest := 0
	for _, x := range h.sc.txns {
		for _, r := range x.rows {
			// + the row's headers (a huge row's are what make it too large) and the contract's
			largest = max(largest, len(r.key)+len(r.payload)+len(r.headers)+256)
		}
	}
	maxRecords, maxBytes := simMemFactor*h.sc.maxRecords+1, int64(simMemFactor*h.sc.maxBytes+largest)
	go func() {
		defer close(finished)
		tick := time.NewTicker(h.samplePeriod())
		defer tick.Stop()
		reported, reportedTxns := false, false
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if n := r.track.inFlight(); n > r.maxTxns && !reportedTxns {
				reportedTxns = true
				h.violate("j", "the tracker holds %d transactions, over the limit %d (twice MaxBufferedRecords %d)", n, r.maxTxns, h.sc.maxRecords)
			}
			n, b := r.letters.held()
			h.mu.Lock()
			h.mem.records, h.mem.bytes = max(h.mem.records, n), max(h.mem.bytes, int(b))
			h.mu.Unlock()
			if !reported && (n > maxRecords || (b > maxBytes && n > 1)) {
				reported = true
				h.violate("e", "the relay holds %d dead letters / %d bytes, over the producer's limits %d / %d",
					n, b, h.sc.maxRecords, h.sc.maxBytes)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// checkIdle is invariant (f): caught up with nothing to send, the stream sends its heartbeat
// status updates and nothing more.
func (h *harness) checkIdle() {
	// Let the last acknowledgements and the keepalive exchange settle first.
	// The heartbeat's period is the status interval, or half the receive timeout if that is
	// shorter (replication's heartbeatEvery: the server must answer well within the timeout).
	every := h.sc.statusInterval
	if half := h.sc.receiveTimeout / 2; half > 0 && half < every {
		every = half
	}
	time.Sleep(2 * every)
	before := len(h.srv.Statuses())
	window := 5 * every
	time.Sleep(window)
	got := len(h.srv.Statuses()) - before
	if limit := 5 + 3; got > limit {
		h.violate("f", "an idle relay sent %d status updates in %s (heartbeat every %s): want at most %d", got, window, every, limit)
	}
}

// checkEnd is invariants (b), (c) and (d), after the final run.
func (h *harness) checkEnd() {
	if err := h.idx.refresh(); err != nil {
		h.violate("b", "cannot read Kafka: %v", err)
		return
	}
	h.mu.Lock()
	committed := h.committed
	forGood := h.forGood
	h.mu.Unlock()
	table := h.tableIDs()
	h.idx.mu.Lock()
	defer h.idx.mu.Unlock()
	injected := func(errs []string) bool {
		for _, e := range errs {
			for _, f := range forGood {
				if strings.Contains(e, f) {
					return true
				}
			}
		}
		return false
	}
	deadIDs := map[string]bool{}
	for _, c := range committed {
		for _, r := range c.rows {
			id := r.ref()
			on, dead := h.where(id, r.topic, table)
			var errs []string
			for _, i := range h.idx.byID[id] {
				if rec := h.idx.recs[i]; rec.topic == simDLQ {
					errs = append(errs, rec.dlqErr)
				}
			}
			errs = append(errs, table[id]...)
			if dead {
				deadIDs[id] = true
			}
			switch {
			case r.class == rowValid && !on && !(dead && injected(errs)):
				h.violate("b", "valid outbox id %s (key %s, topic %s, txn end %s) is not on its topic (dead-lettered: %v %q)", id, r.key, r.topic, c.txn.EndLSN, dead, errs)
			case r.class != rowValid && !dead:
				h.violate("b", "%s outbox id %s (topic %q) is not in the dead-letter topic or table", r.class, id, r.topic)
			}
			if r.class == rowValid && dead && !injected(errs) {
				h.violate("d", "valid outbox id %s (key %s, topic %s, %d bytes) was dead-lettered: %q", id, r.key, r.topic, len(r.payload), errs)
			}
			if r.class == rowHuge && dead && !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "--max-buffered-bytes") }) {
				h.violate("j", "outbox id %s is too large with its headers, dead-lettered without naming --max-buffered-bytes: %q", id, errs)
			}
			if r.reserved && dead && !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "reserved by the record contract") }) {
				h.violate("b", "outbox id %s has reserved row headers %s, dead-lettered without that reason: %q", id, r.headers, errs)
			}
			for _, e := range errs {
				if e == "" {
					h.violate("b", "outbox id %s dead-lettered without %s", id, record.HeaderDLQError)
				}
			}
		}
	}
	// (c): per topic and key, the first delivery of each id comes in commit order: the order of
	// the rows' positions in the WAL, as Server.Commit placed them (transactions do not overlap,
	// and a transaction's changes are in order). The schedule's ids follow the same order, since
	// its transactions are committed one after the other; that is the harness's own check.
	type walPos struct {
		lsn pglogrepl.LSN
		xid uint32
	}
	pos := map[string]walPos{}
	lastID := map[string]int64{} // per source: ids are unique per table only
	for _, c := range committed {
		for i, r := range c.rows {
			pos[r.ref()] = walPos{c.txn.ChangeLSNs[i], c.txn.Xid}
			if r.id < lastID[r.source()] {
				h.violate("sim", "the harness committed outbox id %s (xid %d) after id %d: the WAL is not in the schedule's order", r.ref(), c.txn.Xid, lastID[r.source()])
			}
			lastID[r.source()] = max(lastID[r.source()], r.id)
		}
	}
	for _, d := range h.idx.dups {
		h.violate("h", "a record carries a contract header twice: %s", d)
	}
	type tk struct{ topic, key string }
	type first struct {
		id string
		walPos
	}
	last := map[tk]first{}
	seen := map[string]bool{}
	for _, rec := range h.idx.recs {
		if rec.topic == simDLQ || seen[rec.topic+"/"+rec.id] || deadIDs[rec.id] {
			continue
		}
		seen[rec.topic+"/"+rec.id] = true
		p, ok := pos[rec.id]
		if !ok {
			h.violate("c", "key %s on %s[%d]: offset %d has (outbox-table/outbox-id) %q, which was never committed", rec.key, rec.topic, rec.part, rec.off, rec.id)
			continue
		}
		k := tk{rec.topic, rec.key}
		if l, ok := last[k]; ok && p.lsn < l.lsn && h.passedLetter(rec.topic, rec.key, rec.id) {
			// A later record of its key was acknowledged ahead of its dead letter, which the
			// relay reported (deadletter_order.go: franz-go took that record while it failed this
			// one's batch), and the letter was never parked: the one gap of the key's order that
			// the relay cannot close, counted apart (vresult.excused).
			h.mu.Lock()
			h.excused++
			h.mu.Unlock()
			continue
		} else if ok && p.lsn < l.lsn {
			h.violate("c", "key %s on %s[%d]: outbox id %s (xid %d, at %s) first delivered at offset %d, after id %s (xid %d, at %s) (commit order broken: a gap was filled by a replay)",
				rec.key, rec.topic, rec.part, rec.id, p.xid, p.lsn, rec.off, l.id, l.xid, l.lsn)
			continue
		}
		last[k] = first{rec.id, p}
	}
}

// takeover is one loss of the slot (invariant l): when it happened, and the end offsets once
// the relay's abort of its buffer had ended.
type takeover struct {
	run  int
	at   time.Time
	ends map[string]map[int32]int64
}

// checkTakeovers is invariant (l), after the final run.
func (h *harness) checkTakeovers() {
	h.mu.Lock()
	tos := h.takeovers
	h.mu.Unlock()
	if len(tos) == 0 {
		return
	}
	if err := h.idx.refresh(); err != nil {
		h.violate("l", "cannot read Kafka: %v", err)
		return
	}
	h.idx.mu.Lock()
	defer h.idx.mu.Unlock()
	type tp struct {
		topic string
		part  int32
	}
	for _, to := range tos {
		// The first record of each partition produced after the loss: the next holder's.
		next := map[tp]int64{}
		for _, rec := range h.idx.recs {
			k := tp{rec.topic, rec.part}
			if _, ok := to.ends[rec.topic][rec.part]; !ok || rec.ts.Before(to.at) {
				continue
			}
			if off, ok := next[k]; !ok || rec.off < off {
				next[k] = rec.off
			}
		}
		for _, rec := range h.idx.recs {
			// A request already on its way when the abort began may still land after it
			// ended (nothing recalls it; DESIGN.md rule 9): what must not happen is that it
			// lands after the next holder's records.
			off, ok := next[tp{rec.topic, rec.part}]
			if ok && rec.ts.Before(to.at) && rec.off > off && rec.off >= to.ends[rec.topic][rec.part] {
				h.violate("l", "run %d: %s[%d] offset %d (%s), produced %s before the relay lost the slot, landed after the next holder's first record there (offset %d; end offset %d once the abort ended)",
					to.run+1, rec.topic, rec.part, rec.off, rec.id, to.at.Sub(rec.ts).Round(time.Microsecond), off, to.ends[rec.topic][rec.part])
				break
			}
		}
	}
}

// lostHook is the source side of invariant (l): the relay's producer reports every record it
// buffers (franz-go's HookProduceRecordBuffered), and from the moment the harness saw the abort
// of a lost session begin until the relay's next session started, none may be for a topic.
type lostHook struct{ h *harness }

func (l lostHook) OnProduceRecordBuffered(r *kgo.Record) {
	n := l.h.lostSessions.Load()
	if n == 0 || r.Topic == simDLQ || int64(len(l.h.srv.Sessions())) != n {
		return
	}
	l.h.violate("l", "the relay produced a record for %s (outbox id %s) after it lost the slot, before its next session",
		r.Topic, record.Header(r, record.HeaderOutboxID))
}

// passedLetter reports whether the relay said that a record of topic and key was acknowledged
// ahead of the dead letter of outbox ref id (Relay.onPassed).
func (h *harness) passedLetter(topic, key, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.passed[passedKey(topic, key, id)]
}
