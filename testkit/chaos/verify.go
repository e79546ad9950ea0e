package chaos

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/testkit/oracle"
)

// verifier is the independent consumer: it reads the topic and the dead-letter topic from
// the start, with a client of its own, and keeps every record's id, key and position. With
// exactly-once delivery it reads read_committed, what that mode's consumers see, and a
// second client beside it (markers) reads the topic read_uncommitted with the transaction
// markers, to know which records the aborted transactions hold.
type verifier struct {
	cl      *kgo.Client
	cancel  context.CancelFunc
	done    chan struct{}
	markers *markerWatch // exactly-once only

	mu      sync.Mutex
	recs    []oracle.Delivery
	seen    map[int64]bool
	dead    int
	bad     int // records without a readable outbox-id
	nonTxn  int // records of the topic not written in a transaction
	changed chan struct{}
}

func newVerifier(brokers []string, topic, dlq string, exactlyOnce bool) (*verifier, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic, dlq),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)}
	if exactlyOnce {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	v := &verifier{cl: cl, done: make(chan struct{}), seen: map[int64]bool{}, changed: make(chan struct{}, 1)}
	if exactlyOnce {
		if v.markers, err = newMarkerWatch(brokers, topic); err != nil {
			cl.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	go func() {
		defer close(v.done)
		for ctx.Err() == nil {
			fs := v.cl.PollFetches(ctx)
			v.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if r.Topic == dlq {
					v.dead++
					return
				}
				if !r.Attrs.IsTransactional() {
					v.nonTxn++
				}
				d, err := oracle.Read(r)
				if err != nil {
					v.bad++
					return
				}
				v.recs = append(v.recs, d)
				v.seen[d.ID] = true
			})
			v.mu.Unlock()
			select {
			case v.changed <- struct{}{}:
			default:
			}
		}
	}()
	return v, nil
}

func (v *verifier) close() {
	v.cancel()
	<-v.done
	v.cl.Close()
	if v.markers != nil {
		v.markers.close()
	}
}

// records returns how many records of the topic have been read.
func (v *verifier) records() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.recs)
}

// waitFor waits until every id in want has been read, or timeout.
func (v *verifier) waitFor(ctx context.Context, want map[int64]bool, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		v.mu.Lock()
		missing := 0
		for id := range want {
			if !v.seen[id] {
				missing++
			}
		}
		v.mu.Unlock()
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("chaos: %d of %d committed rows still missing after %s", missing, len(want), timeout)
		case <-v.changed:
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// check fills in the verdict (testkit/oracle's: loss, rolled-back rows delivered, per-key
// order of first deliveries against commit order, duplicates) and blames each duplicate on
// the fault that came last before it was produced. With exactly-once delivery it also counts
// what the aborted transactions held (the markers' reader must have caught up) and which of
// those records the read_committed reader returned.
func (v *verifier) check(w *writer, res *Result) {
	v.mu.Lock()
	recs := append([]oracle.Delivery(nil), v.recs...)
	res.DeadLettered, res.NonTransactional = v.dead, v.nonTxn
	v.mu.Unlock()
	c := w.Counts()
	res.Committed, res.CommittedTxs = c.Rows, c.Txs
	res.RolledBack, res.RolledBackTxs, res.Ambiguous = c.RolledBack, c.RolledBackTxs, c.Ambiguous
	verdict := w.Check(recs)
	res.Records, res.Duplicates = verdict.Records, len(verdict.Duplicates)
	res.Lost, res.RolledBackSeen, res.OrderViolations = len(verdict.Lost), len(verdict.RolledBackSeen), len(verdict.Reordered)
	if len(verdict.Reordered) > 0 {
		res.FirstOrderProblem = verdict.Reordered[0].String()
	}
	if len(verdict.Duplicates) > 0 {
		res.FirstDuplicate = fmt.Sprintf("outbox id %d (key %s) again at %d@%d", verdict.Duplicates[0].ID, verdict.Duplicates[0].Key,
			verdict.Duplicates[0].Partition, verdict.Duplicates[0].Offset)
	}
	if v.markers != nil {
		v.markers.tally(recs, res)
	}
	ev := res.Events
	for _, d := range verdict.Duplicates {
		i := sort.Search(len(ev), func(i int) bool { return ev[i].At.After(d.At) }) - 1
		if i >= 0 {
			ev[i].Dups++
		}
	}
	for _, e := range ev {
		if e.Kind == "kill" && e.Dups > res.MaxDupsOneCrash {
			res.MaxDupsOneCrash, res.MaxDupsCrash = e.Dups, e.N
		}
	}
}

// position is a record's place in the topic.
type position struct {
	partition int32
	offset    int64
}

// markers folds a partition's records, read read_uncommitted with their transaction markers
// (control records), into what each transaction became: a producer's records since its last
// marker belong to its open transaction, and the next marker of that producer on the
// partition commits or aborts them all. Not safe for concurrent use.
type markers struct {
	pending   map[int32]map[int64][]*kgo.Record // partition -> producer id -> records of its open transaction
	aborted   map[position]oracle.Delivery
	committed int // transactional records whose marker was a commit
	next      map[int32]int64
	unread    int // aborted records without a readable outbox id
	data      int // transactional records read
	last      struct {
		partition int32
		producer  int64
	} // the producer and partition of the last transactional record read
}

func newMarkers() *markers {
	return &markers{pending: map[int32]map[int64][]*kgo.Record{}, aborted: map[position]oracle.Delivery{}, next: map[int32]int64{}}
}

// add takes the next record of its partition, in offset order.
func (m *markers) add(r *kgo.Record) {
	m.next[r.Partition] = r.Offset + 1
	open := m.pending[r.Partition]
	if open == nil {
		open = map[int64][]*kgo.Record{}
		m.pending[r.Partition] = open
	}
	switch {
	case r.Attrs.IsControl():
		var key kmsg.ControlRecordKey
		recs := open[r.ProducerID]
		delete(open, r.ProducerID)
		if key.ReadFrom(r.Key) != nil || key.Type != kmsg.ControlRecordKeyTypeAbort {
			m.committed += len(recs)
			return
		}
		for _, x := range recs {
			d, err := oracle.Read(x)
			if err != nil {
				m.unread++
				continue
			}
			m.aborted[position{x.Partition, x.Offset}] = d
		}
	case r.Attrs.IsTransactional():
		open[r.ProducerID] = append(open[r.ProducerID], r)
		m.data++
		m.last.partition, m.last.producer = r.Partition, r.ProducerID
	}
}

// lastOpen returns how many records the transaction of the last transactional record read
// holds, 0 if its marker has been read since.
func (m *markers) lastOpen() int {
	return len(m.pending[m.last.partition][m.last.producer])
}

// open returns how many records belong to transactions whose marker has not been read.
func (m *markers) open() int {
	n := 0
	for _, byProducer := range m.pending {
		for _, recs := range byProducer {
			n += len(recs)
		}
	}
	return n
}

// tally counts, into res, the aborted records, the open ones, how many aborted records are
// of rows the committed records delivered too (each would have been a duplicate, had a
// read_committed reader returned it), and how many records the committed reader read at an
// aborted record's place (none may be).
func (m *markers) tally(committed []oracle.Delivery, res *Result) {
	res.Aborted, res.AbortedUnreadable, res.OpenAtEnd = len(m.aborted)+m.unread, m.unread, m.open()
	delivered := map[int64]bool{}
	for _, d := range committed {
		delivered[d.ID] = true
		if _, ok := m.aborted[position{d.Partition, d.Offset}]; ok {
			res.AbortedSeen++
		}
	}
	for _, d := range m.aborted {
		if delivered[d.ID] {
			res.AbortedDelivered++
		}
	}
}

// markerWatch reads the topic read_uncommitted with its control records into markers, in
// its own goroutine until close.
type markerWatch struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	m       *markers
	changed chan struct{} // a poll added records
}

func newMarkerWatch(brokers []string, topic string) (*markerWatch, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.KeepControlRecords(),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &markerWatch{cl: cl, cancel: cancel, done: make(chan struct{}), m: newMarkers(), changed: make(chan struct{}, 1)}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			w.mu.Lock()
			fs.EachRecord(w.m.add)
			w.mu.Unlock()
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	}()
	return w, nil
}

// awaitOpen waits until a record written since the call belongs to a transaction whose
// marker has not been read, that is until the relay has a Kafka transaction open with records
// in it, and returns how many records that transaction holds on the record's partition; 0 if
// none was seen within timeout. A kill -9 or a SIGSTOP sent then leaves an aborted transaction behind.
func (w *markerWatch) awaitOpen(ctx context.Context, timeout time.Duration) int {
	w.mu.Lock()
	from := w.m.data
	w.mu.Unlock()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		data, open := w.m.data, w.m.lastOpen()
		w.mu.Unlock()
		if data > from && open > 0 {
			return open
		}
		select {
		case <-ctx.Done():
			return 0
		case <-deadline:
			return 0
		case <-w.changed:
		}
	}
}

// caughtUp reports whether every partition has been read up to its end offset in ends.
func (w *markerWatch) caughtUp(ends map[int32]int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, end := range ends {
		if w.m.next[p] < end {
			return false
		}
	}
	return true
}

func (w *markerWatch) tally(committed []oracle.Delivery, res *Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m.tally(committed, res)
}

func (w *markerWatch) close() {
	w.cancel()
	<-w.done
	w.cl.Close()
}
