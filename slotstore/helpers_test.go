package slotstore_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/slotstore"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

const devUpHint = "run `eval \"$(scripts/dev-up.sh)\"` from the repository root first"

// pgURL returns CDC_RELAY_PG_URL through testenv's gate (testenv.Require): without it the
// test fails under make test or CI and skips elsewhere.
func pgURL(t *testing.T) string {
	t.Helper()
	return testenv.PGURL(t)
}

// connect opens a normal connection that the test's cleanup closes.
func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	url := pgURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to CDC_RELAY_PG_URL: %v; is PostgreSQL running? %s", err, devUpHint)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn
}

// names are the per-test object names, derived from t.Name() so that tests
// can run in parallel against one server and re-run after a crash.
type names struct {
	base  string
	Slot  string
	Pub   string
	Role  string
	Table string // unqualified, in schema public
}

func newNames(t *testing.T) names {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 40 {
		s = s[:40]
	}
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	base := fmt.Sprintf("cdcrt_%s_%08x", s, h.Sum32())
	return names{base: base, Slot: base + "_s", Pub: base + "_p", Role: base + "_r", Table: base + "_t"}
}

// table returns the i-th extra table name (unqualified).
func (n names) table(i int) string { return fmt.Sprintf("%s_t%d", n.base, i) }

// env is one test's database fixture.
type env struct {
	names
	admin *pgx.Conn // superuser connection for setup, checks and cleanup
	url   string
}

// setup connects, removes leftovers of an earlier run of the same test, and
// registers the cleanup of every object the names can denote. The test's
// tables, publication, slot and role are dropped when it ends.
func setup(t *testing.T) *env {
	t.Helper()
	e := &env{names: newNames(t), url: pgURL(t)}
	e.admin = connect(t)
	e.cleanup(t)
	t.Cleanup(func() { e.cleanup(t) })
	return e
}

func (e *env) cleanup(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dropSlot(ctx, e.admin, e.Slot); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	stmts := []string{"DROP PUBLICATION IF EXISTS " + pgx.Identifier{e.Pub}.Sanitize()}
	for _, tbl := range []string{e.Table, e.table(1), e.table(2), e.base + "_v"} {
		if strings.HasSuffix(tbl, "_v") {
			stmts = append(stmts, "DROP VIEW IF EXISTS "+pgx.Identifier{"public", tbl}.Sanitize())
			continue
		}
		stmts = append(stmts, "DROP TABLE IF EXISTS "+pgx.Identifier{"public", tbl}.Sanitize())
	}
	var roleExists bool
	if err := e.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, e.Role).Scan(&roleExists); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if roleExists {
		role := pgx.Identifier{e.Role}.Sanitize()
		stmts = append(stmts, "DROP OWNED BY "+role, "DROP ROLE "+role)
	}
	for _, sql := range stmts {
		if _, err := e.admin.Exec(ctx, sql); err != nil {
			t.Errorf("cleanup: %s: %v", sql, err)
		}
	}
}

// dropSlot drops the slot if it exists, ending the process holding it.
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	for {
		var pid *int32
		err := conn.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("drop slot %q: %w", slot, err)
		}
		if pid != nil {
			_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, *pid)
		}
		_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.ObjectInUse || pgErr.Code == pgerrcode.UndefinedObject):
			// still active, or dropped meanwhile: look again
		default:
			return fmt.Errorf("drop slot %q: %w", slot, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop slot %q: %w", slot, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ctx returns a context for one test's statements.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// createTable makes an outbox-shaped table public.name.
func (e *env) createTable(t *testing.T, name string) {
	t.Helper()
	_, err := e.admin.Exec(testCtx(t), `CREATE TABLE `+pgx.Identifier{"public", name}.Sanitize()+` (
    id           BIGSERIAL   PRIMARY KEY,
    aggregate_id TEXT        NOT NULL,
    topic        TEXT        NOT NULL,
    payload      JSONB       NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT NOW()
)`)
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
}

// exec runs sql on the admin connection or fails the test.
func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.admin.Exec(testCtx(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// slotExists reports whether the slot is in pg_replication_slots.
func (e *env) slotExists(t *testing.T, slot string) bool {
	t.Helper()
	return e.exists(t, `pg_replication_slots WHERE slot_name = $1`, slot)
}

// pubExists reports whether the publication is in pg_publication.
func (e *env) pubExists(t *testing.T, pub string) bool {
	t.Helper()
	return e.exists(t, `pg_publication WHERE pubname = $1`, pub)
}

// exists reports whether the catalog query "FROM where" finds a row for arg.
func (e *env) exists(t *testing.T, where, arg string) bool {
	t.Helper()
	var ok bool
	if err := e.admin.QueryRow(testCtx(t), `SELECT EXISTS (SELECT 1 FROM `+where+`)`, arg).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// pubTables lists the publication's tables as "schema.table", sorted.
func (e *env) pubTables(t *testing.T, pub string) []string {
	t.Helper()
	rows, err := e.admin.Query(testCtx(t), `SELECT schemaname || '.' || tablename FROM pg_publication_tables
WHERE pubname = $1 ORDER BY schemaname, tablename`, pub)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

// roleConn opens a connection that runs as e.Role (SET ROLE), a login-less
// non-superuser created with the given attributes, so the tests need no
// password or pg_hba entry for it.
func (e *env) roleConn(t *testing.T, attrs string) *pgx.Conn {
	t.Helper()
	e.exec(t, "CREATE ROLE "+pgx.Identifier{e.Role}.Sanitize()+" "+attrs)
	conn := connect(t)
	if _, err := conn.Exec(testCtx(t), "SET ROLE "+pgx.Identifier{e.Role}.Sanitize()); err != nil {
		t.Fatalf("set role: %v", err)
	}
	return conn
}

// withTable sets up the test's objects with its table created (setup, createTable), and
// returns the env, a context and a Store on a connection of its own: where most tests start.
func withTable(t *testing.T) (*env, context.Context, *slotstore.Store) {
	t.Helper()
	e := setup(t)
	e.createTable(t, e.Table)
	return e, testCtx(t), slotstore.New(connect(t))
}

// created is withTable with the test's slot and publication created on its table, and
// Create's result.
func created(t *testing.T) (*env, context.Context, *slotstore.Store, slotstore.CreateResult) {
	t.Helper()
	e, ctx, store := withTable(t)
	res, err := store.Create(ctx, slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{e.Table}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return e, ctx, store, res
}

// status is store.Status of slot and publication; an error ends the test.
func status(t *testing.T, ctx context.Context, store *slotstore.Store, slot, publication string) slotstore.Status {
	t.Helper()
	st, err := store.Status(ctx, slot, publication)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return st
}
