package testenv

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/oracle"
)

// Writer commits small outbox transactions through a pool and checks what a consumer read
// against them: testkit/oracle's Writer and Ledger, with the test's reporting. It retries
// while Postgres is away: an insert is only recorded once its commit succeeded, and a commit
// whose outcome is unknown (the connection died during COMMIT) is resolved by looking the ids
// up afterwards. Each row's payload carries a tag unique per Writer, so that Verify also
// catches a record of the same id but another row (after a failover, a transaction lost with
// the old primary can have its id reused on the new one).
type Writer struct {
	w     *oracle.Writer
	pool  *pgxpool.Pool
	topic string
}

// NewWriter writes into table (rows for topic) through pool.
func NewWriter(pool *pgxpool.Pool, table, topic string) *Writer {
	return &Writer{w: oracle.NewWriter(table, topic, pool), pool: pool, topic: topic}
}

// Tx commits one transaction of rows rows over nkeys keys, retrying until ctx ends.
func (w *Writer) Tx(ctx context.Context, rows, nkeys int) error {
	keys := make([]string, rows)
	for {
		n := len(w.w.Committed())
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", (n+i)%nkeys)
		}
		if ok, _ := w.w.Tx(ctx, w.pool, keys, false); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(oracle.RetryEvery):
		}
	}
}

// Committed returns every committed id.
func (w *Writer) Committed() []int64 { return w.w.Committed() }

// Run commits a transaction of 1 to 5 rows every interval until ctx ends, in the background;
// the returned func waits for it to stop.
func (w *Writer) Run(ctx context.Context, interval time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if w.Tx(ctx, 1+i%5, 7) != nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	return func() { <-done }
}

// Writing is a Writer's Run in progress and the Consumer of its topic: the shape of every test
// that disturbs the relay while rows keep coming.
type Writing struct {
	*Writer
	cons   *Consumer
	cancel context.CancelFunc
	wait   func()
}

// Start runs w in the background (Run: a transaction every interval) until Stop, Finish or
// the test's cleanup; cons reads w's topic.
func (w *Writer) Start(t testing.TB, cons *Consumer, interval time.Duration) *Writing {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Writing{Writer: w, cons: cons, cancel: cancel, wait: w.Run(ctx, interval)}
	t.Cleanup(r.Stop)
	return r
}

// Stop stops the writer and waits until it has; calling it again does nothing.
func (r *Writing) Stop() {
	r.cancel()
	r.wait()
}

// Finish lets the writer commit more rows than now (what they are, for a timeout's message;
// none if more is 0), stops it, waits until every committed row and then every record on the
// topic has been read (the replay after a reconnect may still be arriving; timeout for each),
// and verifies them (Verify). It returns the records and the duplicates.
func (r *Writing) Finish(t testing.TB, more int, what string, timeout time.Duration) ([]*kgo.Record, int) {
	t.Helper()
	if more > 0 {
		n := len(r.Committed())
		Eventually(t, timeout, what, func() bool { return len(r.Committed()) >= n+more })
	}
	r.Stop()
	r.cons.WaitFor(t, timeout, "every committed row", HasAll(r.Committed()))
	recs := r.cons.WaitFor(t, timeout, "every record on the topic", func(recs []*kgo.Record) bool {
		return int64(len(recs)) >= EndOffset(t, r.topic)
	})
	return recs, r.Verify(t, recs)
}

// Verify checks that every committed row arrived (its id with its own payload), that no row
// of a transaction that failed before its COMMIT did, and that per key the first deliveries
// came in commit order (testkit/oracle's verdict). It returns the number of duplicate records.
func (w *Writer) Verify(t testing.TB, recs []*kgo.Record) int {
	t.Helper()
	ds := make([]oracle.Delivery, 0, len(recs))
	for _, r := range recs {
		if d, err := oracle.Read(r); err == nil {
			ds = append(ds, d)
		}
	}
	v := w.w.Check(ds)
	for i, r := range v.Lost {
		if i == 10 {
			break
		}
		t.Errorf("outbox id %d (n %d) lost", r.ID, r.N)
	}
	if len(v.Lost) > 0 {
		t.Errorf("%d of %d committed rows lost", len(v.Lost), w.w.Counts().Rows)
	}
	for _, d := range v.RolledBackSeen {
		t.Errorf("outbox id %d (n %d) delivered, but its transaction never committed", d.ID, d.N)
	}
	for _, k := range v.Reordered {
		t.Error(k)
	}
	return len(v.Duplicates)
}

// HasAll reports whether every id in want has arrived.
func HasAll(want []int64) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		got := make(map[string]bool, len(recs))
		for _, r := range recs {
			got[Header(r, "outbox-id")] = true
		}
		for _, id := range want {
			if !got[strconv.FormatInt(id, 10)] {
				return false
			}
		}
		return true
	}
}
