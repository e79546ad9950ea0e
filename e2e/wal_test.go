package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Heavy writes to another table, no outbox rows: the slot's confirmed position follows the
// server's WAL, so a quiet outbox does not retain the WAL of other tables' traffic.
func TestQuietOutboxSlotFollowsOtherTablesWAL(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	other := tableOfItsOwn(t, e.F, "_other", `(id bigserial primary key, filler text)`)
	p := e.Start(t, nil)
	testenv.Eventually(t, 30*time.Second, "the relay to stream", func() bool { return strings.Contains(p.Output(), "streaming") })

	start := e.F.SlotConfirmed(t)
	for i := 0; i < 5; i++ {
		if _, err := e.F.Pool.Exec(context.Background(),
			`INSERT INTO `+other+` (filler) SELECT repeat('x', 200) FROM generate_series(1, 20000)`); err != nil {
			t.Fatal(err)
		}
	}
	target := e.F.CurrentWAL(t)
	if target-start < 4<<20 {
		t.Fatalf("wrote only %d bytes of WAL", target-start)
	}
	var now pglogrepl.LSN
	testenv.Eventually(t, 60*time.Second, "confirmed_flush_lsn to pass the other table's WAL", func() bool {
		now = e.F.SlotConfirmed(t)
		return now >= target
	})
	t.Logf("slot advanced %d bytes (%s -> %s) without a single outbox row", now-start, start, now)
}

// A slot that retains more WAL than --wal-retained-warn-bytes: `slot status` says so on its
// retained_wal_check line, and `run` logs a warning once and sets the metric.
func TestRetainedWALAboveThresholdWarns(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	// About 1.5 MB of WAL the slot has not confirmed: no relay runs yet.
	tableOfItsOwn(t, e.F, "_filler", `AS SELECT g, repeat('x', 200) AS filler FROM generate_series(1, 5000) g`)

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
