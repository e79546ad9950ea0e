package prune

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// partitionedOutbox creates app.<name>, the outbox partitioned by id range: partition k holds ids
// [k*100, (k+1)*100), k = 1..n, and a default partition. Dropped at cleanup.
func partitionedOutbox(t *testing.T, pool *pgxpool.Pool, n int) (table string) {
	t.Helper()
	ctx := context.Background()
	table = "app." + testenv.Name(t)
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS app`); err != nil {
		var ok bool
		if pool.QueryRow(ctx, `SELECT true FROM pg_namespace WHERE nspname = 'app'`).Scan(&ok) != nil {
			t.Fatal(err)
		}
	}
	stmts := []string{`CREATE TABLE ` + table + ` (id bigint, payload jsonb, created_at timestamptz, published_at timestamptz,
		PRIMARY KEY (id)) PARTITION BY RANGE (id)`,
		`CREATE TABLE ` + table + `_default PARTITION OF ` + table + ` DEFAULT`}
	for k := 1; k <= n; k++ {
		stmts = append(stmts, fmt.Sprintf(`CREATE TABLE %s_p%d PARTITION OF %s FOR VALUES FROM (%d) TO (%d)`, table, k, table, k*100, (k+1)*100))
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table+` CASCADE`)
		for k := 1; k <= n; k++ {
			_, _ = pool.Exec(context.Background(), fmt.Sprintf(`DROP TABLE IF EXISTS %s_p%d`, table, k))
		}
	})
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return table
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// partitionState says whether partition rel exists and is attached to a table.
func partitionState(t *testing.T, pool *pgxpool.Pool, rel string) (exists, attached bool) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT true, relispartition FROM pg_class WHERE oid = to_regclass($1)`, rel).Scan(&exists, &attached)
	if err != nil && err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	return exists, attached
}

func count(t *testing.T, pool *pgxpool.Pool, rel string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+rel).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// In poll mode a partition goes whole only when it holds rows and every one of them is old
// and marked published: a partition with one unmarked row, one with new rows, an empty one
// (a range to come) and the default partition stay, with every row.
func TestPrunePartitionsDropsOnlyWholePublishedPartitions(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	table := partitionedOutbox(t, pool, 4)
	old, now := "now() - interval '2 hours'", "now()"
	exec(t, pool, `INSERT INTO `+table+` SELECT g, '{}', `+old+`, now() FROM generate_series(100, 102) g`) // p1: all published, old
	exec(t, pool, `INSERT INTO `+table+` SELECT g, '{}', `+old+`, now() FROM generate_series(200, 201) g`) // p2: published, old...
	exec(t, pool, `INSERT INTO `+table+` VALUES (202, '{}', `+old+`, NULL)`)                               // ...but one not
	exec(t, pool, `INSERT INTO `+table+` SELECT g, '{}', `+now+`, now() FROM generate_series(300, 301) g`) // p3: published, new
	exec(t, pool, `INSERT INTO `+table+` SELECT g, '{}', `+old+`, now() FROM generate_series(900, 901) g`) // default
	// p4 empty

	res, err := Run(ctx, mustConn(t), Options{Mode: ModePoll, Table: table, OlderThan: time.Hour, Partitions: PartitionsDrop})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{table + "_p1"}; !slices.Equal(res.Partitions, want) {
		t.Errorf("dropped %v, want %v (kept %v)", res.Partitions, want, res.PartitionsKept)
	}
	if exists, _ := partitionState(t, pool, table+"_p1"); exists {
		t.Errorf("%s_p1 still exists", table)
	}
	for rel, n := range map[string]int{table + "_p2": 3, table + "_p3": 2, table + "_p4": 0, table + "_default": 2} {
		if got := count(t, pool, rel); got != n {
			t.Errorf("%s: %d rows, want %d (kept whole)", rel, got, n)
		}
	}

	// Marked, the last row lets p2 go: detached, it stays a table of its own.
	exec(t, pool, `UPDATE `+table+` SET published_at = now() WHERE id = 202`)
	res, err = Run(ctx, mustConn(t), Options{Mode: ModePoll, Table: table, OlderThan: time.Hour, Partitions: PartitionsDetach})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{table + "_p2"}; !slices.Equal(res.Partitions, want) {
		t.Errorf("detached %v, want %v (kept %v)", res.Partitions, want, res.PartitionsKept)
	}
	if exists, attached := partitionState(t, pool, table+"_p2"); !exists || attached {
		t.Errorf("%s_p2: exists %v, attached %v; want a detached table", table, exists, attached)
	}
	if got := count(t, pool, table+"_p2"); got != 3 {
		t.Errorf("detached %s_p2 holds %d rows, want 3", table, got)
	}

	if _, err := Run(ctx, mustConn(t), Options{Mode: ModePoll, Table: table + "_p3", OlderThan: time.Hour, Partitions: PartitionsDrop}); err == nil {
		t.Error("--partitions on a table that is not partitioned: no error")
	}
}

// In run mode a partition whose rows all look published when Run first reads it, but which a
// transaction open at the mark is writing into, is judged again under lock once that
// transaction commits: its row is not confirmed by the slot, so the partition stays, with it.
func TestPrunePartitionsNeverDropsOneAnOpenTransactionWritesInto(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := context.Background()
	table := partitionedOutbox(t, pool, 2)
	old := "now() - interval '2 hours'"
	exec(t, pool, `INSERT INTO `+table+` SELECT g, '{}', `+old+`, NULL FROM generate_series(100, 101) g`)
	exec(t, pool, `INSERT INTO `+table+` SELECT g, '{}', `+old+`, NULL FROM generate_series(200, 202) g`)

	slot := testenv.Name(t)
	exec(t, pool, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, slot)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot) })
	// The slot's consumer: it confirms the WAL end as a caught-up relay does.
	stop := make(chan struct{})
	advanced := make(chan struct{})
	go func() {
		defer close(advanced)
		for {
			_, _ = pool.Exec(context.Background(), `SELECT pg_replication_slot_advance($1, pg_current_wal_insert_lsn())`, slot)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-advanced }()

	// A writer's transaction, open at the mark, with an old creation time: invisible to Run's
	// first reading of p1.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO `+table+` VALUES (102, '{}', `+old+`, NULL)`); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	conn := mustConn(t)
	go func() {
		res, err := Run(ctx, conn, Options{Mode: ModeRun, Slot: slot, Table: table, OlderThan: time.Hour, Wait: 30 * time.Second,
			Partitions: PartitionsDrop})
		done <- outcome{res, err}
	}()
	// Run judges p1 whole, then waits for the writer's lock on the table to judge it again.
	testenv.Eventually(t, 30*time.Second, "prune to wait for the writer's lock on "+table, func() bool {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = to_regclass($1) AND NOT granted)`, table).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("prune did not finish after the writer committed")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	if got := count(t, pool, table+"_p1"); got != 3 {
		t.Fatalf("%s_p1 holds %d rows, want 3: the row committed after the mark is unpublished", table, got)
	}
	if want := []string{table + "_p2"}; !slices.Equal(o.res.Partitions, want) {
		t.Errorf("dropped %v, want %v", o.res.Partitions, want)
	}
	if !slices.Contains(o.res.PartitionsKept, table+"_p1") {
		t.Errorf("kept %v, want %s_p1 among them", o.res.PartitionsKept, table)
	}
}

func mustConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(context.Background(), testenv.PGConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
