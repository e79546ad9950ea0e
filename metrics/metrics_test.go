package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

type fakeSource struct{ s metrics.RelaySnapshot }

func (f fakeSource) MetricsSnapshot() metrics.RelaySnapshot { return f.s }

// Several relays, pollers and slot watchers can live in one process, each with its own
// registry: nothing registers in the global default registry.
func TestRegistriesAreIndependent(t *testing.T) {
	for i := range 2 {
		reg := metrics.NewRegistry("run", "test")
		r := metrics.NewRelay(reg)
		r.SetSource(fakeSource{metrics.RelaySnapshot{Published: int64(10 + i), State: "standby", Confirmed: pglogrepl.LSN(0x16B3748)}})
		metrics.NewSlot(reg, 1<<30)
		r.ProduceError(metrics.ClassRejected)
		got, err := testutil.GatherAndCount(reg, "cdc_relay_records_published_total", "cdc_relay_replication_state", "cdc_relay_produce_errors_total")
		if err != nil {
			t.Fatal(err)
		}
		if got != 1+len(metrics.States)+5 {
			t.Errorf("registry %d: %d series, want %d", i, got, 1+len(metrics.States)+5)
		}
		want := `# HELP cdc_relay_active 1 when this relay holds the slot and streams; 0 when standby, connecting or stopped.
# TYPE cdc_relay_active gauge
cdc_relay_active 0
# HELP cdc_relay_confirmed_lsn The flush position (LSN, as a byte offset) the relay confirmed or is about to confirm to PostgreSQL.
# TYPE cdc_relay_confirmed_lsn gauge
cdc_relay_confirmed_lsn 2.3803720e+07
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cdc_relay_active", "cdc_relay_confirmed_lsn"); err != nil {
			t.Error(err)
		}
	}
	pr := prometheus.NewRegistry()
	metrics.NewPoller(pr) // the poller's names do not collide among themselves
	if n, err := testutil.GatherAndCount(pr); err != nil || n == 0 {
		t.Errorf("poller registry: %d series, %v", n, err)
	}
}

// The hooks the relay calls per record are atomic adds: no allocation on the hot path, and a
// nil *Relay (no metrics configured) is a no-op.
func TestRelayHooksDoNotAllocate(t *testing.T) {
	m := metrics.NewRelay(prometheus.NewRegistry())
	commit := time.Now()
	if n := testing.AllocsPerRun(1000, func() {
		m.Acked(commit)
		m.ProduceError(metrics.ClassRejected)
	}); n != 0 {
		t.Errorf("%v allocations per record", n)
	}
	var none *metrics.Relay
	none.Acked(commit)
	none.ProduceError(metrics.ClassBadRow)
	none.SetSource(nil)
	var np *metrics.Poller
	np.Published(10, commit)
	np.SetPending(3, commit)
	np.SetSource(nil)
}

func TestPollerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := metrics.NewPoller(reg)
	p.SetSource(func() metrics.PollerSnapshot { return metrics.PollerSnapshot{Published: 2, Cycles: 1} })
	p.Published(7, time.Now().Add(-time.Second))
	p.Published(3, time.Now())
	p.SetPending(42, time.Now().Add(-90*time.Second))
	p.ProduceError(metrics.ClassBroker)
	want := `# HELP cdc_relay_outbox_pending_rows Outbox rows with published_at IS NULL.
# TYPE cdc_relay_outbox_pending_rows gauge
cdc_relay_outbox_pending_rows 42
# HELP cdc_relay_published_bytes_total Value bytes of the records acknowledged on their own topic.
# TYPE cdc_relay_published_bytes_total counter
cdc_relay_published_bytes_total 10
# HELP cdc_relay_records_published_total Records acknowledged by Kafka on their own topic.
# TYPE cdc_relay_records_published_total counter
cdc_relay_records_published_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cdc_relay_outbox_pending_rows", "cdc_relay_published_bytes_total", "cdc_relay_records_published_total"); err != nil {
		t.Error(err)
	}
	if v := value(t, reg, "cdc_relay_outbox_oldest_pending_age_seconds"); v < 89 || v > 120 {
		t.Errorf("oldest pending age %v, want about 90", v)
	}
}

// Against the real PostgreSQL: the watcher counts rows with published_at IS NULL and the age
// of the oldest, and is ready once it has read the table.
func TestPendingWatcherCountsPendingRows(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	table := "public." + testenv.Name(t)
	if _, err := pool.Exec(ctx, testenv.OutboxDDL(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (aggregate_id, topic, payload, created_at, published_at)
		SELECT 'k', 't', '{}', now() - interval '1 hour' + g * interval '1 second', CASE WHEN g <= 3 THEN now() END
		FROM generate_series(1, 10) g`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w := &metrics.PendingWatcher{Conn: testenv.PGConfig(t), Table: table, Interval: 50 * time.Millisecond, Metrics: metrics.NewPoller(reg)}
	if err := w.Ready(ctx); err == nil {
		t.Error("ready before the first count")
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	testenv.Eventually(t, 30*time.Second, "7 pending rows", func() bool { return value(t, reg, "cdc_relay_outbox_pending_rows") == 7 })
	// The oldest pending row is row 4: created an hour ago plus 4 seconds.
	if age := value(t, reg, "cdc_relay_outbox_oldest_pending_age_seconds"); age < 3590 || age > 3700 {
		t.Errorf("oldest pending age %v, want about 3596", age)
	}
	if err := w.Ready(ctx); err != nil {
		t.Errorf("not ready after counting: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE `+table+` SET published_at = now()`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "no pending rows", func() bool {
		return value(t, reg, "cdc_relay_outbox_pending_rows") == 0 && value(t, reg, "cdc_relay_outbox_oldest_pending_age_seconds") == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestHandlerServesMetricsHealthAndReadiness(t *testing.T) {
	reg := metrics.NewRegistry("run", "test")
	var mu sync.Mutex
	var notReady error = errors.New("replication is standby, not streaming from the slot")
	srv := httptest.NewServer(metrics.Handler(reg, func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return notReady
	}))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "standby") {
		t.Errorf("/readyz %d %q, want 503 with the reason", code, body)
	}
	mu.Lock()
	notReady = nil
	mu.Unlock()
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz %d once ready", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `cdc_relay_info{mode="run",version="test"} 1`) || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics %d:\n%s", code, body)
	}
}

func TestSlotUpdateReportsThresholdCrossings(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := metrics.NewSlot(reg, 1000)
	safe := int64(5000)
	steps := []struct {
		retained int64
		want     metrics.Crossing
	}{{10, metrics.Unchanged}, {1001, metrics.WentAbove}, {5000, metrics.Unchanged}, {1000, metrics.WentBelow}, {0, metrics.Unchanged}}
	for _, st := range steps {
		if got := s.Update(slotstore.Status{RetainedWALBytes: st.retained, WALStatus: "reserved", SafeWALSize: &safe}); got != st.want {
			t.Errorf("retained %d: crossing %v, want %v", st.retained, got, st.want)
		}
	}
	if n, _ := testutil.GatherAndCount(reg, "cdc_relay_slot_safe_wal_size_bytes"); n != 1 {
		t.Errorf("safe_wal_size absent although limited")
	}
	s.Update(slotstore.Status{WALStatus: "reserved"}) // unlimited: the series goes away
	if n, _ := testutil.GatherAndCount(reg, "cdc_relay_slot_safe_wal_size_bytes"); n != 0 {
		t.Errorf("safe_wal_size present although unlimited")
	}
	disabled := metrics.NewSlot(prometheus.NewRegistry(), 0)
	if c := disabled.Update(slotstore.Status{RetainedWALBytes: 1 << 40}); c != metrics.Unchanged {
		t.Errorf("a zero threshold warned")
	}
}

// syncWriter is a log sink safe for the watcher's goroutine and the test.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Against the real PostgreSQL: a slot nobody reads retains the WAL written after it, the
// watcher reports it and warns once when it crosses the threshold.
func TestSlotWatcherReportsRetainedWAL(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	slot := testenv.Name(t)
	if _, err := pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot) })
	table := "public." + slot + "_filler"
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` AS SELECT g, repeat('x', 200) AS filler FROM generate_series(1, 5000) g`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })

	reg := prometheus.NewRegistry()
	logs := &syncWriter{}
	w := &metrics.SlotWatcher{Conn: testenv.PGConfig(t), Slot: slot, Interval: 50 * time.Millisecond,
		Metrics: metrics.NewSlot(reg, 64<<10), Logger: slog.New(slog.NewTextHandler(logs, nil))}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	testenv.Eventually(t, 30*time.Second, "retained WAL above the threshold", func() bool {
		return value(t, reg, "cdc_relay_slot_retained_wal_above_threshold") == 1
	})
	if r := value(t, reg, "cdc_relay_slot_retained_wal_bytes"); r <= 64<<10 {
		t.Errorf("retained_wal_bytes %v, want > 64 KiB after a 1 MB table", r)
	}
	if l := value(t, reg, "cdc_relay_slot_lag_bytes"); l <= 64<<10 {
		t.Errorf("lag_bytes %v, want > 64 KiB", l)
	}
	if a := value(t, reg, "cdc_relay_slot_active"); a != 0 {
		t.Errorf("slot_active %v for a slot nobody streams", a)
	}
	testenv.Eventually(t, 10*time.Second, "the warning", func() bool {
		return strings.Contains(logs.String(), "retains more WAL than --wal-retained-warn-bytes")
	})
	if n := strings.Count(logs.String(), "retains more WAL"); n != 1 {
		t.Errorf("warned %d times, want once per crossing:\n%s", n, logs.String())
	}
}

// A slot that disappears is a failed read, counted and logged once, never a crash.
func TestSlotWatcherCountsFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &syncWriter{}
	m := metrics.NewSlot(reg, 0)
	w := &metrics.SlotWatcher{Conn: testenv.PGConfig(t), Slot: "no_such_slot_" + strings.ToLower(testenv.Name(t))[2:12], Interval: 20 * time.Millisecond,
		Metrics: m, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testenv.Eventually(t, 30*time.Second, "three failed reads", func() bool {
		return value(t, reg, "cdc_relay_slot_status_errors_total") >= 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "cannot read the slot's status"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
}

// value returns the first series of the named gauge or counter in reg, or -1 if absent.
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
