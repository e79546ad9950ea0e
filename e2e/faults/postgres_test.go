package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// Postgres restarted (pg_ctl restart -m fast) while rows keep coming: the relay reconnects
// with backoff, resumes from the slot, and loses nothing; per key, first deliveries keep commit
// order.
func TestPostgresRestartReconnectsAndResumes(t *testing.T) {
	e := testenv.NewRelayEnv(t, true)
	p := e.Start(t, nil)
	w, cons := writing(t, e, 10*time.Millisecond)

	testenv.Eventually(t, 30*time.Second, "rows flowing before the restart", func() bool { return len(cons.Records()) > 50 })
	testenv.PGCtl(t, "restart")
	testenv.Eventually(t, 60*time.Second, "the relay to reconnect", func() bool {
		return strings.Contains(p.Output(), "replication connection lost: reconnecting") && strings.Count(p.Output(), "msg=streaming") >= 2
	})
	recs, dups := w.Finish(t, 50, "rows committed after the restart", 60*time.Second)
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
	t.Logf("%d rows committed across a Postgres restart, %d records, %d duplicates", len(w.Committed()), len(recs), dups)
}

// The walsender terminated (pg_terminate_backend): the relay reconnects and loses nothing.
func TestWalsenderTerminatedReconnects(t *testing.T) {
	e := testenv.NewRelayEnv(t, true)
	p := e.Start(t, nil)
	w, cons := writing(t, e, 10*time.Millisecond)

	for i := 0; i < 3; i++ {
		have := len(cons.Records())
		testenv.Eventually(t, 30*time.Second, "rows flowing", func() bool { return len(cons.Records()) > have+30 })
		var pid int32
		testenv.Eventually(t, 30*time.Second, "the slot to be active", func() bool {
			err := e.F.Pool.QueryRow(context.Background(), `SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1`, e.F.Slot).Scan(&pid)
			return err == nil && pid != 0
		})
		var ok bool
		if err := e.F.Pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
		}
		testenv.Eventually(t, 30*time.Second, "the relay to stream again", func() bool {
			return strings.Count(p.Output(), "msg=streaming") >= i+2
		})
	}
	_, dups := w.Finish(t, 0, "", 60*time.Second)
	if n := strings.Count(p.Output(), "replication connection lost: reconnecting"); n < 3 {
		t.Errorf("%d reconnects logged, want 3", n)
	}
	t.Logf("%d rows across 3 walsender kills, %d duplicates", len(w.Committed()), dups)
}
