package poller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// fake is a kfake cluster with switches: down fails every request (the broker is gone),
// reject answers produce requests to the topics named with the error given.
type fake struct {
	c      *kfake.Cluster
	down   atomic.Bool
	reject atomic.Value // map[string]*kerr.Error
	names  map[[16]byte]string
}

func newFake(t *testing.T, topics ...string) *fake {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &fake{c: c, names: map[[16]byte]string{}}
	f.reject.Store(map[string]*kerr.Error{})
	// Produce v13 names topics by id only.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	details, err := kadm.NewClient(cl).ListTopics(context.Background(), topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range details {
		f.names[d.ID] = d.Topic
	}
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if f.down.Load() {
			return nil, errors.New("broker down"), true
		}
		pr, ok := req.(*kmsg.ProduceRequest)
		if !ok {
			return nil, nil, false
		}
		bad := f.reject.Load().(map[string]*kerr.Error)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		rejected := false
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				if e := cmp.Or(bad[rt.Topic], bad[f.names[rt.TopicID]]); e != nil {
					sp.ErrorCode, rejected = e.Code, true
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if !rejected {
			return nil, nil, false
		}
		return resp, nil, true
	})
	return f
}

// newTestPoller makes an outbox table with n pending rows and a poller on it that talks to f.
func newTestPoller(t *testing.T, f *fake, rows int) (*Poller, *testenv.Fixture) {
	t.Helper()
	return newTestPollerWith(t, f, rows, nil)
}

// newTestPollerWith is newTestPoller with eos as the poller's ExactlyOnce.
func newTestPollerWith(t *testing.T, f *fake, rows int, eos *ExactlyOnce) (*Poller, *testenv.Fixture) {
	t.Helper()
	pool := testenv.Pool(t)
	name := testenv.Name(t)
	fx := &testenv.Fixture{Name: name, Table: "public." + name, Topic: "events", DLQ: "dlq", Pool: pool}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, testenv.OutboxDDL(fx.Table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+fx.Table) })
	if _, err := pool.Exec(ctx, `INSERT INTO `+fx.Table+` (aggregate_id, topic, payload)
		SELECT 'k' || (g % 3), 'events', jsonb_build_object('g', g) FROM generate_series(1, $1) g`, rows); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{
		Conn: testenv.PGConfig(t), Table: fx.Table, DLQTopic: "dlq", Batch: 10,
		AckTimeout: time.Second, ProbeTimeout: 300 * time.Millisecond, ExactlyOnce: eos,
		Sink: sink.Config{Brokers: f.c.ListenAddrs(), DialTimeout: 200 * time.Millisecond,
			Opts: []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Check(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return p, fx
}

func pendingRows(t *testing.T, fx *testenv.Fixture) int {
	t.Helper()
	var n int
	if err := fx.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+fx.Table+` WHERE published_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Kafka gone (seed 002): the batch is not acknowledged in time, the transaction is rolled
// back and its rows stay pending; the next cycles only probe Kafka and touch no row until it
// answers; then one cycle publishes the rows it had held back.
func TestBrokerDownKeepsRowsPendingAndProbesOncePerCycle(t *testing.T) {
	f := newFake(t, "events", "dlq")
	p, fx := newTestPoller(t, f, 25)
	ctx := context.Background()

	if n, err := p.cycle(ctx); err != nil || n != 10 {
		t.Fatalf("first cycle: %d rows, %v", n, err)
	}
	f.down.Store(true)
	n, err := p.cycle(ctx)
	if !errors.Is(err, ErrUnavailable) || n != 10 {
		t.Fatalf("cycle with Kafka down: %d rows, %v; want the batch rolled back with ErrUnavailable", n, err)
	}
	if got := pendingRows(t, fx); got != 15 {
		t.Fatalf("%d rows pending, want 15: the rolled-back batch must stay pending", got)
	}
	cycles := p.stats.Cycles.Load()
	for i := 0; i < 3; i++ {
		start := time.Now()
		if _, err := p.cycle(ctx); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("probe %d: %v, want ErrUnavailable", i, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("probe %d took %s, want about the probe timeout", i, d)
		}
	}
	if got := p.stats.Cycles.Load(); got != cycles {
		t.Errorf("%d cycles selected rows while Kafka was down; want none", got-cycles)
	}
	f.down.Store(false)
	if n, err := p.cycle(ctx); err != nil || n != 10 {
		t.Fatalf("cycle after Kafka came back: %d rows, %v", n, err)
	}
	if got := pendingRows(t, fx); got != 5 {
		t.Errorf("%d rows pending, want 5", got)
	}
	if p.stats.RolledBack.Load() != 1 || p.stats.Published.Load() != 20 {
		t.Errorf("rolled back %d, published %d; want 1 and 20", p.stats.RolledBack.Load(), p.stats.Published.Load())
	}
}

// A record Kafka rejects for good is parked on the dead-letter topic and its row marked; a
// dead-letter topic that refuses it too stops the poller and the row stays pending.
func TestRejectedRecordsAreDeadLettered(t *testing.T) {
	f := newFake(t, "events", "dlq")
	p, fx := newTestPoller(t, f, 10)
	ctx := context.Background()
	f.reject.Store(map[string]*kerr.Error{"events": kerr.InvalidRecord})
	if n, err := p.cycle(ctx); err != nil || n != 10 {
		t.Fatalf("cycle: %d rows, %v", n, err)
	}
	if p.stats.DeadLettered.Load() != 10 || pendingRows(t, fx) != 0 {
		t.Fatalf("dead-lettered %d, pending %d; want 10 and 0", p.stats.DeadLettered.Load(), pendingRows(t, fx))
	}

	if _, err := fx.Pool.Exec(ctx, `INSERT INTO `+fx.Table+` (aggregate_id, topic, payload) VALUES ('k', 'events', '{}')`); err != nil {
		t.Fatal(err)
	}
	f.reject.Store(map[string]*kerr.Error{"events": kerr.InvalidRecord, "dlq": kerr.InvalidRecord})
	_, err := p.cycle(ctx)
	if !errors.Is(err, ErrDeadLetterRefused) || IsRetryable(err) {
		t.Fatalf("got %v, want ErrDeadLetterRefused (not retryable)", err)
	}
	if pendingRows(t, fx) != 1 {
		t.Errorf("the row neither published nor parked was marked")
	}
}

// A batch the broker refuses as too large although each of its records fits a batch of its own
// (the topic's max.message.bytes was lowered while the poller ran: franz-go never splits a
// refused batch, and every record in it fails with MESSAGE_TOO_LARGE) is not the records'
// fault: they are not dead-lettered, the cycle fails and the rows stay pending. The poller
// dead-lettered them as the relay did not (sink.Rejected against Sink.RejectedAlone): each
// event went to the dead-letter topic instead of its own and its row was marked published.
func TestBatchRefusedAsTooLargeIsNotDeadLettered(t *testing.T) {
	f := newFake(t, "events", "dlq")
	p, fx := newTestPoller(t, f, 10)
	ctx := context.Background()
	f.reject.Store(map[string]*kerr.Error{"events": kerr.MessageTooLarge})
	_, err := p.cycle(ctx)
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("cycle: %v, want the batch's MESSAGE_TOO_LARGE", err)
	}
	if n := p.stats.DeadLettered.Load(); n != 0 {
		t.Errorf("dead-lettered %d records that fit a batch of their own, want 0", n)
	}
	if n := pendingRows(t, fx); n != 10 {
		t.Errorf("pending rows %d, want all 10 (nothing published, nothing parked)", n)
	}
	f.reject.Store(map[string]*kerr.Error{})
	if n, err := p.cycle(ctx); err != nil || n != 10 || pendingRows(t, fx) != 0 {
		t.Fatalf("cycle once the topic takes the batch: %d rows, %v, %d pending; want 10 published", n, err, pendingRows(t, fx))
	}
}

// The table changes under the prepared statements (a column added and the mapped headers
// column dropped): the next cycle fails, rebuilds its statements, and the one after works.
func TestSchemaChangeRebuildsTheQueries(t *testing.T) {
	f := newFake(t, "events", "dlq")
	p, fx := newTestPoller(t, f, 30)
	ctx := context.Background()
	if _, err := p.cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.Pool.Exec(ctx, `ALTER TABLE `+fx.Table+` DROP COLUMN headers`); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; i < 3; i++ {
		if _, err = p.cycle(ctx); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("cycles after ALTER TABLE: %v", err)
	}
	if got := pendingRows(t, fx); got > 10 {
		t.Errorf("%d rows pending", got)
	}
}

// The pending-rows index is made once, found by the next call, and used by the SELECT.
func TestCreateIndex(t *testing.T) {
	pool := testenv.Pool(t)
	name := testenv.Name(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, testenv.OutboxDDL("public."+name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS public.`+name) })
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	idx, created, err := CreateIndex(ctx, conn.Conn(), name, outbox.Columns{})
	if err != nil || !created || idx != name+"_pending_idx" {
		t.Fatalf("first: %s %v %v", idx, created, err)
	}
	if _, created, err := CreateIndex(ctx, conn.Conn(), "public."+name, outbox.Columns{}); err != nil || created {
		t.Fatalf("second: %v %v", created, err)
	}
	tb, _ := outbox.ParseTable(name)
	q, err := buildQueries(ctx, pool, tb, outbox.Columns{}.WithDefaults(), "", nil)
	if err != nil || !q.hasIndex {
		t.Fatalf("index not found by the poller: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO public.`+name+` (aggregate_id, topic, payload, published_at)
		SELECT 'k', 't', '{}', CASE WHEN g < 9990 THEN now() END FROM generate_series(1, 10000) g; ANALYZE public.`+name); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `EXPLAIN (FORMAT TEXT) `+q.sel, 100)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if want := fmt.Sprintf("Index Scan using %s", idx); !strings.Contains(plan, want) {
		t.Errorf("plan %q does not use the index", plan)
	}
	if _, _, err := CreateIndex(ctx, conn.Conn(), name+"_missing", outbox.Columns{}); !errors.Is(err, ErrNoTable) {
		t.Errorf("missing table: %v", err)
	}
}
