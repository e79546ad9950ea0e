package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/testkit/oracle"
)

// latencyConsumer reads a topic from its start and records, for each record with an outbox
// id above a threshold, the time from its cdc-commit-time to the return of the fetch that
// brought it. It runs in its own goroutine until close.
type latencyConsumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	after    atomic.Int64 // ids <= after are warm-up
	records  atomic.Int64 // every record read
	batches  atomic.Int64 // every record batch fetched (batchCounter), transaction markers' too
	measured atomic.Int64 // distinct ids above after

	// markMs (unix ms) set, sinceMark is when (unix ns) the first record stamped at or after
	// it was read: the first record of a publisher started at the mark.
	markMs    atomic.Int64
	sinceMark atomic.Int64

	mu   sync.Mutex
	seen *oracle.Seen // ids read; its Dups, the records of an id read before, needs no lock
	lat  []time.Duration
	prod []time.Duration // commit to the record's timestamp (the producer's Produce call, ms precision)
	bad  error           // first record without a usable header
}

// consume reads topic for pub: read_committed for an exactly-once publisher, the records its
// consumers would see (and when).
func (e *env) consume(topic string, pub Publisher) (*latencyConsumer, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(e.cfg.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)}
	if pub.ExactlyOnce {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	c := &latencyConsumer{done: make(chan struct{}), seen: oracle.NewSeen()}
	cl, err := kgo.NewClient(append(opts, kgo.WithHooks(batchCounter{&c.batches}))...)
	if err != nil {
		return nil, fmt.Errorf("bench: consumer: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cl, c.cancel = cl, cancel
	c.after.Store(-1)
	go c.loop(ctx)
	return c, nil
}

func (c *latencyConsumer) loop(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		fs := c.cl.PollFetches(ctx)
		now := time.Now()
		after := c.after.Load()
		c.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			c.records.Add(1)
			if m := c.markMs.Load(); m > 0 && r.Timestamp.UnixMilli() >= m {
				c.sinceMark.CompareAndSwap(0, now.UnixNano())
			}
			id, err := strconv.ParseInt(string(record.Header(r, record.HeaderOutboxID)), 10, 64)
			if err != nil {
				c.badRecord(fmt.Errorf("record without a numeric outbox-id: %w", err))
				return
			}
			if !c.seen.Add(id) {
				return
			}
			if after < 0 || id <= after {
				return
			}
			ct, err := time.Parse(time.RFC3339Nano, string(record.Header(r, record.HeaderCommitTime)))
			if err != nil {
				c.badRecord(fmt.Errorf("outbox id %d: cdc-commit-time: %w", id, err))
				return
			}
			c.lat = append(c.lat, now.Sub(ct))
			c.prod = append(c.prod, r.Timestamp.Sub(ct))
			c.measured.Add(1)
		})
		c.mu.Unlock()
	}
}

func (c *latencyConsumer) badRecord(err error) {
	if c.bad == nil {
		c.bad = err
	}
}

// has reports whether id has been read.
func (c *latencyConsumer) has(id int64) bool {
	return withSeen(c, func(s *oracle.Seen) bool { return s.Has(id) })
}

// withSeen answers f about the ids read so far, under the consumer's lock.
func withSeen[T any](c *latencyConsumer, f func(*oracle.Seen) T) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f(c.seen)
}

// firstSince starts watching for the first record whose timestamp (set by its producer) is
// at or after t.
func (c *latencyConsumer) firstSince(t time.Time) {
	c.sinceMark.Store(0)
	c.markMs.Store(t.UnixMilli())
}

// missing returns how many of ids have not been read.
func (c *latencyConsumer) missing(ids []int64) int {
	return withSeen(c, func(s *oracle.Seen) int { return s.Missing(ids) })
}

// lowest returns the smallest id read, or -1.
func (c *latencyConsumer) lowest() int64 { return withSeen(c, (*oracle.Seen).Lowest) }

// measureAfter starts measuring the records with ids above id.
func (c *latencyConsumer) measureAfter(id int64) { c.after.Store(id) }

// result returns the latencies measured (commit to receipt, and commit to the record's
// timestamp) and the first malformed record, if any.
func (c *latencyConsumer) result() (lat, prod []time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.lat...), append([]time.Duration(nil), c.prod...), c.bad
}

func (c *latencyConsumer) close() {
	c.cancel()
	<-c.done
	c.cl.Close()
}

// batchCounter counts the record batches a consumer fetches. Every produce request appends one
// batch per partition it carries, and the broker's work (appends, replication, fetches)
// grows with them: batches per record says how full a publisher's produce requests are, read
// on the topic alike for every publisher. A transactional publisher's markers are batches too.
type batchCounter struct{ n *atomic.Int64 }

func (b batchCounter) OnFetchBatchRead(kgo.BrokerMetadata, string, int32, kgo.FetchBatchMetrics) {
	b.n.Add(1)
}
