package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// A SIGTERM while `run`'s preflight waits for PostgreSQL to answer is a clean stop, as one while
// it waits for PostgreSQL to come up is: the relay exited 1 ("read role and settings: context
// canceled", or the publication lookup's), which a supervisor stopping it counts as a failure
// (found by TestSwitchingPublishersAsProperties, whose last relay was stopped as it started).
// The preflight is held here by a lock on pg_publication, on a server of the test's own.
func TestStopDuringThePreflightExitsZero(t *testing.T) {
	e := testenv.NewPrivateRelayEnv(t, false)
	tx, err := e.F.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `LOCK TABLE pg_catalog.pg_publication IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	p := e.Start(t, nil, "--metrics-addr", "")
	testenv.Eventually(t, 60*time.Second, "the relay's preflight to wait for the lock", func() bool {
		var n int
		err := e.F.Pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n > 0
	})
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after a SIGTERM during the preflight, want 0:\n%s", code, p.Output())
	}
}
