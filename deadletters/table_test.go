package deadletters_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/internal/testenv"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// Dead-letter table names follow outbox.ParseTable: a bare name is public.name, taken literally.
func TestDeadLetterTableNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63)
	for _, tc := range []struct {
		in, schema, name, quoted string
	}{
		{"cdc_relay_dead_letters", "public", "cdc_relay_dead_letters", `"public"."cdc_relay_dead_letters"`},
		{deadletters.DefaultTable, "public", "cdc_relay_dead_letters", `"public"."cdc_relay_dead_letters"`},
		{"ops.dead", "ops", "dead", `"ops"."dead"`},
		{"Ops.Dead Letters", "Ops", "Dead Letters", `"Ops"."Dead Letters"`}, // literal: no case folding
		{`a"b.c`, `a"b`, "c", `"a""b"."c"`},
		{long + "." + long, long, long, `"` + long + `"."` + long + `"`},
	} {
		got, err := outbox.ParseTable(tc.in)
		if err != nil || got.Schema != tc.schema || got.Name != tc.name || got.Sanitize() != tc.quoted ||
			got.String() != tc.schema+"."+tc.name {
			t.Errorf("ParseTable(%q) = %+v (%s), %v; want %s.%s (%s)", tc.in, got, got.Sanitize(), err, tc.schema, tc.name, tc.quoted)
		}
		ddl, err := deadletters.TableDDL(tc.in)
		if err != nil || !strings.HasPrefix(ddl, "CREATE TABLE IF NOT EXISTS "+tc.quoted+" (") {
			t.Errorf("TableDDL(%q) = %q, %v; want it to create %s", tc.in, ddl, err, tc.quoted)
		}
	}
	for _, bad := range []string{"", "a.b.c", ".dead", "public.", ".", long + "a", "public." + long + "a", "pub\x00lic.dead"} {
		if got, err := outbox.ParseTable(bad); !errors.Is(err, outbox.ErrBadName) {
			t.Errorf("ParseTable(%q) = %+v, %v; want ErrBadName", bad, got, err)
		}
		if _, err := deadletters.TableDDL(bad); !errors.Is(err, outbox.ErrBadName) {
			t.Errorf("TableDDL(%q): %v; want ErrBadName", bad, err)
		}
		if err := deadletters.CreateTable(t.Context(), nil, bad); !errors.Is(err, outbox.ErrBadName) {
			t.Errorf("CreateTable(%q): %v; want ErrBadName before any statement", bad, err)
		}
	}
}

// TestDeadLetterTableIgnoresSearchPath creates, finds and inserts into the dead-letter table
// over a connection whose search_path puts another schema first, and which holds a table of
// the same name: the table is public's (an unqualified name means public.name) all the same.
func TestDeadLetterTableIgnoresSearchPath(t *testing.T) {
	t.Parallel()
	admin := connect(t)
	ctx := testCtx(t)
	name := testenv.Name(t)
	decoy := name + "_sp"
	dsch := pgx.Identifier{decoy}.Sanitize()
	exec(t, admin, "CREATE SCHEMA "+dsch)
	t.Cleanup(func() {
		exec(t, admin, "DROP SCHEMA IF EXISTS "+dsch+" CASCADE")
		exec(t, admin, "DROP TABLE IF EXISTS "+pgx.Identifier{"public", name}.Sanitize())
	})
	exec(t, admin, "CREATE TABLE "+pgx.Identifier{decoy, name}.Sanitize()+" (decoy int)")

	conn := connect(t)
	exec(t, conn, "SET search_path TO "+dsch+", public")
	for _, table := range []string{name, "public." + name} { // the second finds it
		if err := deadletters.CreateTable(ctx, conn, table); err != nil {
			t.Fatalf("CreateTable(%q) with search_path %s, public: %v", table, decoy, err)
		}
	}
	columns := func(schema string) string {
		var cols string
		if err := admin.QueryRow(ctx, `SELECT coalesce(string_agg(column_name, ',' ORDER BY ordinal_position), '')
			FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`, schema, name).Scan(&cols); err != nil {
			t.Fatal(err)
		}
		return cols
	}
	if got := columns("public"); !strings.HasPrefix(got, "id,slot,outbox_id,") {
		t.Fatalf("public.%s has columns %q: the dead-letter table was not created in public", name, got)
	}
	if got := columns(decoy); got != "decoy" {
		t.Errorf("%s.%s has columns %q, want the decoy's only", decoy, name, got)
	}

	// The relay inserts with the quoted, qualified name (outbox.Table.Sanitize).
	tn, err := outbox.ParseTable(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+tn.Sanitize()+` (slot, error) VALUES ($1, 'e')`, name); err != nil {
		t.Fatalf("insert into %s over search_path %s, public: %v", tn, decoy, err)
	}
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{"public", name}.Sanitize()+` WHERE slot = $1`, name).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows in public.%s: %d, %v; want 1", name, n, err)
	}

	// A schema that does not exist is named in the error.
	err = deadletters.CreateTable(ctx, conn, name+"_nosuch."+name)
	if err == nil || !strings.Contains(err.Error(), "schema \""+name+"_nosuch\" does not exist") {
		t.Errorf("CreateTable in a missing schema: %v; want it to name the schema", err)
	}
}

// connect opens a normal connection that the test's cleanup closes.
func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, testenv.PGConfig(t))
	if err != nil {
		t.Fatalf("connect to CDC_RELAY_PG_URL: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func exec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
