package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

type fakeSource struct{ s metrics.RelaySnapshot }

func (f fakeSource) MetricsSnapshot() metrics.RelaySnapshot { return f.s }

// commit_to_send_seconds observes the server's commit to its send of the transaction, and
// nothing for a transaction without either time.
func TestCommitToSendObservesTheServersTimes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewRelay(reg)
	commit := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	m.Sent(commit, commit.Add(3*time.Millisecond))
	m.Sent(commit, time.Time{})
	m.Sent(time.Time{}, commit)
	got, err := testutil.GatherAndCount(reg, "cdc_relay_commit_to_send_seconds")
	if err != nil || got != 1 {
		t.Fatalf("%d series, %v", got, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cdc_relay_commit_to_send_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 1 || h.GetSampleSum() < 0.0029 || h.GetSampleSum() > 0.0031 {
			t.Errorf("count %d, sum %v: want one observation of 3ms", h.GetSampleCount(), h.GetSampleSum())
		}
	}
}

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
		m.Sent(commit, commit)
		m.ProduceError(metrics.ClassRejected)
	}); n != 0 {
		t.Errorf("%v allocations per record", n)
	}
	var none *metrics.Relay
	none.Acked(commit)
	none.Sent(commit, commit)
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

func TestHandlerServesMetricsHealthAndReadiness(t *testing.T) {
	reg := metrics.NewRegistry("run", "test")
	var mu sync.Mutex
	var notReady = errors.New("replication is standby, not streaming from the slot")
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

func TestSlotUpdateSetsTheThresholdGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := metrics.NewSlot(reg, 1000)
	safe := int64(5000)
	for _, st := range []struct {
		retained int64
		above    float64
	}{{10, 0}, {1001, 1}, {5000, 1}, {1000, 0}, {0, 0}} {
		s.Update(slotstore.Status{RetainedWALBytes: st.retained, WALStatus: "reserved", SafeWALSize: &safe})
		if got := value(t, reg, "cdc_relay_slot_retained_wal_above_threshold"); got != st.above {
			t.Errorf("retained %d: above_threshold %v, want %v", st.retained, got, st.above)
		}
	}
	if n, _ := testutil.GatherAndCount(reg, "cdc_relay_slot_safe_wal_size_bytes"); n != 1 {
		t.Errorf("safe_wal_size absent although limited")
	}
	s.Update(slotstore.Status{WALStatus: "reserved"}) // unlimited: the series goes away
	if n, _ := testutil.GatherAndCount(reg, "cdc_relay_slot_safe_wal_size_bytes"); n != 0 {
		t.Errorf("safe_wal_size present although unlimited")
	}
	dreg := prometheus.NewRegistry()
	metrics.NewSlot(dreg, 0).Update(slotstore.Status{RetainedWALBytes: 1 << 40})
	if got := value(t, dreg, "cdc_relay_slot_retained_wal_above_threshold"); got != 0 {
		t.Errorf("a zero threshold warned")
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
