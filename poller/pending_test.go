package poller

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/slotstore"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Against the real PostgreSQL: WatchPending counts rows with published_at IS NULL and the age
// of the oldest, and the poller is ready once it has read the table.
func TestWatchPendingCountsPendingRows(t *testing.T) {
	pool, table := pendingTable(t, `(aggregate_id, topic, payload, created_at, published_at)
		SELECT 'k', 't', '{}', now() - interval '1 hour' + g * interval '1 second', CASE WHEN g <= 3 THEN now() END
		FROM generate_series(1, 10) g`)
	ctx := context.Background()
	p, reg := pendingPoller(t, table, nil)
	gauge := func(name string) float64 {
		n, err := testutil.GatherAndCount(reg, name)
		if err != nil || n != 1 {
			t.Fatalf("%s: %d series, %v", name, n, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	if err := p.PendingReady(ctx); err == nil {
		t.Error("ready before the first count")
	}
	watchPending(t, p)
	testenv.Eventually(t, 30*time.Second, "7 pending rows", func() bool { return gauge("cdc_relay_outbox_pending_rows") == 7 })
	// The oldest pending row is row 4: created an hour ago plus 4 seconds.
	if age := gauge("cdc_relay_outbox_oldest_pending_age_seconds"); age < 3590 || age > 3700 {
		t.Errorf("oldest pending age %v, want about 3596", age)
	}
	if err := p.PendingReady(ctx); err != nil {
		t.Errorf("not ready after counting: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE `+table+` SET published_at = now()`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "no pending rows", func() bool {
		return gauge("cdc_relay_outbox_pending_rows") == 0 && gauge("cdc_relay_outbox_oldest_pending_age_seconds") == 0
	})
}

// poll --shard's pending gauge counts the shard's pending rows only: the rows it is behind on.
func TestWatchPendingCountsTheShardsRows(t *testing.T) {
	pool, table := pendingTable(t, `(aggregate_id, topic, payload)
		SELECT 'key-' || g, 't', '{}' FROM generate_series(1, 100) g`)
	ctx := context.Background()
	sh := slotstore.Shard{Index: 2, Count: 3}
	var want float64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE `+sh.RowFilter("aggregate_id")).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if want == 0 || want == 100 {
		t.Fatalf("shard %s holds %v of the 100 rows: the test needs some in and some out", sh, want)
	}
	p, reg := pendingPoller(t, table, &sh)
	watchPending(t, p)
	testenv.Eventually(t, 30*time.Second, "the pending count", func() bool { return p.PendingReady(ctx) == nil })
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "cdc_relay_outbox_pending_rows" {
			if got := mf.GetMetric()[0].GetGauge().GetValue(); got != want {
				t.Fatalf("pending rows %v, want shard %s's %v of 100", got, sh, want)
			}
			return
		}
	}
	t.Fatal("no cdc_relay_outbox_pending_rows")
}

// pendingTable makes an outbox table, dropped at cleanup, and fills it: rows is what follows
// INSERT INTO the table.
func pendingTable(t *testing.T, rows string) (*pgxpool.Pool, string) {
	t.Helper()
	pool := testenv.Pool(t)
	ctx := context.Background()
	table := "public." + testenv.Name(t)
	if _, err := pool.Exec(ctx, testenv.OutboxDDL(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` `+rows); err != nil {
		t.Fatal(err)
	}
	return pool, table
}

// pendingPoller is a poller of table (of shard's rows when shard is set; no broker it can reach),
// closed at cleanup, and the registry of its metrics.
func pendingPoller(t *testing.T, table string, shard *slotstore.Shard) (*Poller, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := New(Config{Conn: testenv.PGConfig(t), Table: table, Metrics: metrics.NewPoller(reg), Shard: shard,
		Sink: sink.Config{Brokers: []string{"127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, reg
}

// watchPending runs p.WatchPending, counting every 50 ms, until the test ends.
func watchPending(t *testing.T, p *Poller) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.WatchPending(ctx, 50*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
}
