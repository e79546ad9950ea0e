package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// insertAged writes n rows created age ago in one transaction and returns their ids.
func insertAged(t *testing.T, f *testenv.Fixture, n int, age time.Duration, published bool) []int64 {
	t.Helper()
	var ids []int64
	rows, err := f.Pool.Query(context.Background(), `INSERT INTO `+f.Table+` (aggregate_id, topic, payload, created_at, published_at)
		SELECT 'k' || g, $1, jsonb_build_object('g', g), now() - make_interval(secs => $2), CASE WHEN $3 THEN now() END
		FROM generate_series(1, $4) g RETURNING id`, f.Topic, age.Seconds(), published, n)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// remaining returns which of ids are still in the table.
func remaining(t *testing.T, f *testenv.Fixture, ids []int64) map[int64]bool {
	t.Helper()
	rows, err := f.Pool.Query(context.Background(), `SELECT id FROM `+f.Table+` WHERE id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	left := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		left[id] = true
	}
	return left
}

// `outbox prune --mode run` deletes old rows only once the slot has confirmed a WAL position
// taken after they committed: never while the relay is stopped, never a row whose transaction
// was still open, and a row committed later goes on a later run once Kafka has it.
func TestPruneRunDeletesOnlyRowsTheSlotConfirmed(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	old := insertAged(t, e.F, 5, 10*24*time.Hour, false)
	young := insertAged(t, e.F, 3, 0, false)
	prune := func(wait string) (string, string, int) {
		return testenv.Run(t, 90*time.Second, e.Bin, e.Env, "outbox", "prune", "--table", e.F.Table, "--older-than", "168h", "--batch", "2", "--wait", wait)
	}

	// The relay is not running: nothing is confirmed, nothing may go.
	out, errOut, code := prune("1s")
	if code != 1 || !strings.Contains(errOut, "has not confirmed") {
		t.Fatalf("prune with the relay stopped: exit %d\n%s%s", code, out, errOut)
	}
	if left := remaining(t, e.F, append(old, young...)); len(left) != 8 {
		t.Fatalf("prune deleted rows the relay never published: %d of 8 left", len(left))
	}

	e.Start(t, nil)
	cons := testenv.Consume(t, e.F.Topic)
	cons.WaitFor(t, 60*time.Second, "the 8 rows", hasAll(append(old, young...)))

	// An old row in a transaction still open while prune runs.
	ctx := context.Background()
	tx := e.F.Begin(t)
	defer tx.Rollback(ctx)
	var late int64
	if err := tx.QueryRow(ctx, `INSERT INTO `+e.F.Table+` (aggregate_id, topic, payload, created_at) VALUES ('late', $1, '{}', now() - interval '30 days') RETURNING id`, e.F.Topic).Scan(&late); err != nil {
		t.Fatal(err)
	}

	// A transaction open anywhere on the server (another test's) can hold rows back for a
	// later run, so prune until the old rows are gone.
	testenv.Eventually(t, 60*time.Second, "prunes that delete the 5 old rows", func() bool {
		out, errOut, code = prune("60s")
		if code != 0 || !strings.Contains(out, "pruned ") {
			t.Fatalf("prune: exit %d\n%s%s", code, out, errOut)
		}
		return len(remaining(t, e.F, old)) == 0
	})
	left := remaining(t, e.F, young)
	for _, id := range young {
		if !left[id] {
			t.Errorf("young row %d pruned", id)
		}
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cons.WaitFor(t, 60*time.Second, "the late row", hasAll([]int64{late}))
	// Again, an open transaction elsewhere may hold the late row back for a later run.
	testenv.Eventually(t, 60*time.Second, "a prune that deletes the late row", func() bool {
		out, errOut, code = prune("60s")
		if code != 0 || !strings.Contains(out, "pruned 1 rows") && !strings.Contains(out, "pruned 0 rows") {
			t.Fatalf("second prune: exit %d, want the late row pruned\n%s%s", code, out, errOut)
		}
		return strings.Contains(out, "pruned 1 rows")
	})
	if remaining(t, e.F, []int64{late})[late] {
		t.Error("the late row survived the second prune")
	}
	t.Log(strings.TrimSpace(out))
}

// `outbox prune --mode run` says how many old rows it kept and which open transaction held
// them back, and deletes them on a run after that transaction ends.
func TestPruneRunReportsWhatHoldsRowsBack(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	ctx := context.Background()
	// A transaction with an xid, open while the old rows are written and first pruned.
	tx := e.F.Begin(t)
	defer tx.Rollback(ctx)
	var pid int32
	var xid string
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid(), pg_current_xact_id()::text`).Scan(&pid, &xid); err != nil {
		t.Fatal(err)
	}
	old := insertAged(t, e.F, 3, 10*24*time.Hour, false)
	e.Start(t, nil)
	cons := testenv.Consume(t, e.F.Topic)
	cons.WaitFor(t, 60*time.Second, "the 3 rows", hasAll(old))
	prune := func() (string, string, int) {
		return testenv.Run(t, 90*time.Second, e.Bin, e.Env, "outbox", "prune", "--table", e.F.Table, "--older-than", "168h", "--wait", "60s")
	}

	out, errOut, code := prune()
	if code != 0 || !strings.Contains(out, "pruned 0 rows") || !strings.Contains(out, "kept 3 rows created before") {
		t.Fatalf("prune with a transaction open: exit %d, want 0 pruned and 3 kept\n%s%s", code, out, errOut)
	}
	// The oldest open transaction is ours (xid xid) unless another test's is older; either way
	// one is named.
	if !regexp.MustCompile(`pid [0-9]+ \(`).MatchString(out) {
		t.Errorf("the kept rows' report names no transaction (ours: pid %d, xid %s):\n%s", pid, xid, out)
	}
	if left := remaining(t, e.F, old); len(left) != 3 {
		t.Fatalf("%d of the 3 held-back rows left", len(left))
	}
	t.Log(strings.TrimSpace(out))

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Another test's open transaction may hold the rows back for a while longer.
	testenv.Eventually(t, 60*time.Second, "a prune that deletes the 3 rows", func() bool {
		out, errOut, code = prune()
		if code != 0 {
			t.Fatalf("prune: exit %d\n%s%s", code, out, errOut)
		}
		return len(remaining(t, e.F, old)) == 0
	})
	if strings.Contains(out, "kept ") {
		t.Errorf("the prune that emptied the table still reports kept rows:\n%s", out)
	}
}

// `outbox prune --mode poll` deletes old rows whose published_at is set, in batches.
func TestPrunePollDeletesOnlyPublishedRows(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t)
	bin := testenv.Binary(t, false)
	oldPub := insertAged(t, f, 5, 8*24*time.Hour, true)
	oldPending := insertAged(t, f, 2, 8*24*time.Hour, false)
	youngPub := insertAged(t, f, 2, time.Hour, true)
	out, errOut, code := testenv.Run(t, 60*time.Second, bin, nil, "outbox", "prune", "--mode", "poll", "--table", f.Table, "--older-than", "168h", "--batch", "2")
	if code != 0 || !strings.Contains(out, "pruned 5 rows") || !strings.Contains(out, "in 3 batches") {
		t.Fatalf("prune: exit %d, want 5 rows in 3 batches\n%s%s", code, out, errOut)
	}
	left := remaining(t, f, append(append(append([]int64{}, oldPub...), oldPending...), youngPub...))
	if len(left) != 4 {
		t.Errorf("%d rows left, want the 2 pending and the 2 young", len(left))
	}
	for _, id := range append(oldPending, youngPub...) {
		if !left[id] {
			t.Errorf("row %d pruned although pending or young", id)
		}
	}
	// Bad usage is exit 2.
	if _, errOut, code := testenv.Run(t, 30*time.Second, bin, nil, "outbox", "prune", "--mode", "run", "--table", f.Table, "--older-than", "1h"); code != 2 {
		t.Errorf("--mode run without --slot: exit %d, want 2\n%s", code, errOut)
	}
	if _, errOut, code := testenv.Run(t, 30*time.Second, bin, nil, "outbox", "prune", "--mode", "poll", "--table", f.Table); code != 2 {
		t.Errorf("no --older-than: exit %d, want 2\n%s", code, errOut)
	}
}
