package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

var metricName = regexp.MustCompile(`cdc_relay_[a-z_]+`)

// exposed returns every series name the run and poll registries expose.
func exposed(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	run := metrics.NewRegistry("run", "test")
	metrics.NewRelay(run).SetSource(fakeSource{metrics.RelaySnapshot{State: "streaming"}})
	safe := int64(1)
	metrics.NewSlot(run, 1).Update(slotstore.Status{WALStatus: "reserved", SafeWALSize: &safe})
	poll := metrics.NewRegistry("poll", "test")
	p := metrics.NewPoller(poll)
	p.SetSource(func() metrics.PollerSnapshot { return metrics.PollerSnapshot{} })
	for _, reg := range []*prometheus.Registry{run, poll} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			names[mf.GetName()] = true
			if mf.GetType() == dto.MetricType_HISTOGRAM {
				for _, s := range []string{"_bucket", "_count", "_sum"} {
					names[mf.GetName()+s] = true
				}
			}
		}
	}
	return names
}

// The Grafana dashboard and the alert rules only use metrics that exist (a renamed metric
// would leave a panel silently empty).
func TestDashboardAndAlertsUseExistingMetrics(t *testing.T) {
	names := exposed(t)
	b, err := os.ReadFile("../deploy/grafana/cdc-relay.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	used := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				used++
				if !names[n] {
					t.Errorf("panel %q uses %s, which no registry exposes", p.Title, n)
				}
			}
		}
	}
	if used < 20 {
		t.Errorf("the dashboard uses only %d metric references", used)
	}
	alerts, err := os.ReadFile("../deploy/prometheus/cdc-relay-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range metricName.FindAllString(string(alerts), -1) {
		if !names[n] {
			t.Errorf("alert rules use %s, which no registry exposes", n)
		}
	}
}
