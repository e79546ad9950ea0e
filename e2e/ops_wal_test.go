package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// A slot that retains more WAL than --wal-retained-warn-bytes: `slot status` says so on its
// retained_wal_check line, and `run` logs a warning once and sets the metric.
func TestRetainedWALAboveThresholdWarns(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	other := e.F.Table + "_filler"
	ctx := context.Background()
	// About 1.5 MB of WAL the slot has not confirmed: no relay runs yet.
	if _, err := e.F.Pool.Exec(ctx, `CREATE TABLE `+other+` AS SELECT g, repeat('x', 200) AS filler FROM generate_series(1, 5000) g`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.F.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+other) })

	status := func(warn string) string {
		t.Helper()
		out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, e.Env, "slot", "status", "--wal-retained-warn-bytes", warn)
		if code != 0 {
			t.Fatalf("slot status: exit %d\n%s%s", code, out, errOut)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "retained_wal_check") {
				return line
			}
		}
		t.Fatalf("slot status has no retained_wal_check line:\n%s", out)
		return ""
	}
	if l := status("65536"); !strings.Contains(l, "ABOVE threshold") {
		t.Errorf("threshold 64 KiB: %q", l)
	}
	if l := status("1099511627776"); !strings.Contains(l, "ok:") {
		t.Errorf("threshold 1 TiB: %q", l)
	}
	if l := status("0"); !strings.Contains(l, "not checked") {
		t.Errorf("threshold 0: %q", l)
	}

	// The relay confirms nothing for an hour (no prompt confirm after a transaction either: other
	// tests' transactions on this server would move the slot), so the retained WAL stays above 64 KiB.
	p := e.Start(t, nil, "--status-interval", "1h", "--confirm-delay", "-1s", "--wal-retained-warn-bytes", "65536",
		"--slot-status-interval", "100ms", "--metrics-addr", "127.0.0.1:0")
	addr := metricsAddr(t, p)
	m := metricAtLeast(t, addr, "cdc_relay_slot_retained_wal_above_threshold", 1)
	if m["cdc_relay_slot_retained_wal_bytes"] <= 65536 || m["cdc_relay_slot_retained_wal_threshold_bytes"] != 65536 {
		t.Errorf("retained %v, threshold %v", m["cdc_relay_slot_retained_wal_bytes"], m["cdc_relay_slot_retained_wal_threshold_bytes"])
	}
	testenv.Eventually(t, 10*time.Second, "the warning in the log", func() bool {
		return strings.Contains(p.Output(), "retains more WAL than --wal-retained-warn-bytes")
	})
	// Once per crossing, not once per check.
	metricAtLeast(t, addr, "cdc_relay_slot_status_last_success_timestamp_seconds", float64(time.Now().Add(time.Second).Unix()))
	if n := strings.Count(p.Output(), "retains more WAL"); n != 1 {
		t.Errorf("warned %d times, want 1:\n%s", n, p.Output())
	}
}
