package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// A SIGTERM while `run` still checks the slot and publication at startup is a clean stop, as
// one after streaming began is: exit 0 and a line saying nothing was published or confirmed,
// not exit 1 with "context canceled" (which a supervisor counts as a crash and restarts).
//
// The relay is held inside its startup check by a lock on pg_publication, which the check
// reads; the lock is held only until the relay has been signalled (other tests that read the
// catalog wait that long).
func TestSignalDuringStartupChecksStopsCleanly(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	ctx := context.Background()
	app := "startup-stop-" + testenv.Name(t)
	pg := testenv.PGURL(t)
	sep := "?"
	if strings.Contains(pg, "?") {
		sep = "&"
	}

	tx, err := e.F.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE pg_catalog.pg_publication IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	p := e.Start(t, nil, "--pg-url", pg+sep+"application_name="+app, "--metrics-addr", "127.0.0.1:0")
	testenv.Eventually(t, 60*time.Second, "the relay's startup check to wait for the lock on pg_publication", func() bool {
		var waiting bool
		err := e.F.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE application_name = left($1, 63) AND wait_event_type = 'Lock')`, app).Scan(&waiting)
		return err == nil && waiting
	})
	code := p.Stop(t)
	_ = tx.Rollback(ctx)
	out := p.Output()
	if code != 0 {
		t.Fatalf("SIGTERM during the startup check: exit %d, want 0 (a clean stop)\n%s", code, out)
	}
	if !strings.Contains(out, "stopped during startup, before streaming: nothing was published or confirmed") {
		t.Fatalf("SIGTERM during the startup check: no line saying the relay stopped before streaming\n%s", out)
	}
}
