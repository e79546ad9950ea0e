package faults

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Two relays on one slot: the second waits as a standby (and says so, retrying), and takes
// over within 10 s after the first is killed -9; nothing is lost across the takeover.
//
// After kill -9 the kernel closes the dead relay's socket, so its walsender sees EOF at once
// and releases the slot; the takeover is then bounded by the standby's retry interval (2 s)
// plus one connection. Only when the relay's host vanishes without closing the connection
// (power loss, partition) does the walsender linger, until wal_sender_timeout (60 s here) or
// TCP keepalives notice; the relay does not terminate a walsender it believes dead, because
// from another host a dead relay and a slow live one look the same.
func TestStandbyTakesOverAfterKill9(t *testing.T) {
	e := testenv.NewRelayEnv(t, true)
	a := e.Start(t, nil)
	testenv.Eventually(t, 30*time.Second, "the first relay to stream", func() bool { return strings.Contains(a.Output(), "msg=streaming") })
	b := e.Start(t, nil)
	testenv.Eventually(t, 30*time.Second, "the second relay to wait as a standby, retrying", func() bool {
		return strings.Count(b.Output(), "waiting as a standby") >= 2
	})
	if strings.Contains(b.Output(), "msg=streaming") || b.Exited() {
		t.Fatalf("the standby streams or exited while the slot is held:\n%s", b.Output())
	}

	w, cons := writing(t, e, 10*time.Millisecond)
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, "rows flowing through the first relay", func() bool { return len(cons.Records()) > 100 })

	var oldPID int32
	if err := e.F.Pool.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, e.F.Slot).Scan(&oldPID); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(a.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var released time.Duration
	testenv.Eventually(t, 60*time.Second, "the dead relay's walsender to release the slot", func() bool {
		var pid int32
		_ = e.F.Pool.QueryRow(ctx, `SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1`, e.F.Slot).Scan(&pid)
		released = time.Since(killed)
		return pid != oldPID
	})
	testenv.Eventually(t, 30*time.Second, "the standby to take over", func() bool { return strings.Contains(b.Output(), "msg=streaming") })
	takeover := time.Since(killed)
	if takeover > 10*time.Second {
		t.Errorf("the standby took over %s after the kill, want within 10s", takeover.Round(time.Millisecond))
	}
	_, dups := w.Finish(t, 100, "rows after the takeover", 60*time.Second)
	t.Logf("walsender released the slot %s after kill -9, standby streaming %s after it; %d rows, %d duplicates",
		released.Round(time.Millisecond), takeover.Round(time.Millisecond), len(w.Committed()), dups)
}
