package deadletters_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// TableDDL and CreateTable name the table as outbox.ParseTable does (a bare name is
// public.name, taken literally, always quoted), and refuse a bad name before any statement.
func TestDeadLetterTableNames(t *testing.T) {
	long := strings.Repeat("a", 63)
	quoted := map[string]string{
		"cdc_relay_dead_letters":      `"public"."cdc_relay_dead_letters"`,
		deadletters.DefaultTable:      `"public"."cdc_relay_dead_letters"`,
		"ops.dead":                    `"ops"."dead"`,
		"Ops.Dead Letters":            `"Ops"."Dead Letters"`, // literal: no case folding
		`a"b.c`:                       `"a""b"."c"`,
		long + "." + long:             `"` + long + `"."` + long + `"`,
		deadletters.DefaultMarksTable: `"public"."cdc_relay_dead_letter_marks"`,
	}
	for in, q := range quoted {
		ddl, err := deadletters.TableDDL(in)
		if err != nil || !strings.HasPrefix(ddl, "CREATE TABLE IF NOT EXISTS "+q+" (") {
			t.Errorf("TableDDL(%q) = %q, %v; want it to create %s", in, ddl, err, q)
		}
		if ddl, err := deadletters.MarksTableDDL(in); err != nil || !strings.HasPrefix(ddl, "CREATE TABLE IF NOT EXISTS "+q+" (") {
			t.Errorf("MarksTableDDL(%q) = %q, %v; want it to create %s", in, ddl, err, q)
		}
	}
	for _, bad := range []string{"", "a.b.c", ".dead", "public.", ".", long + "a", "public." + long + "a", "pub\x00lic.dead"} {
		if _, err := deadletters.TableDDL(bad); !errors.Is(err, outbox.ErrBadName) {
			t.Errorf("TableDDL(%q): %v; want ErrBadName", bad, err)
		}
		if _, err := deadletters.MarksTableDDL(bad); !errors.Is(err, outbox.ErrBadName) {
			t.Errorf("MarksTableDDL(%q): %v; want ErrBadName", bad, err)
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
	admin, ctx, name := connect(t), t.Context(), testenv.Name(t)
	decoy := name + "_sp"
	dsch := newSchema(t, admin, decoy)
	t.Cleanup(func() { exec(t, admin, "DROP TABLE IF EXISTS "+pgx.Identifier{"public", name}.Sanitize()) })
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

// TestDeadLetterTablePermission runs CreateTable as a role without CREATE on the schema: the
// error names the grant on the table's schema, and once an owner made the table the role
// needs none. The table is qualified with the test's own schema (not in the role's
// search_path), so the shared database's public schema, where the default table may already
// exist, is not involved.
func TestDeadLetterTablePermission(t *testing.T) {
	t.Parallel()
	admin, ctx, name := connect(t), t.Context(), testenv.Name(t)
	schema := name + "_sch"
	sch, role := newSchema(t, admin, schema), pgx.Identifier{name}.Sanitize()
	exec(t, admin, "CREATE ROLE "+role+" NOLOGIN NOSUPERUSER")
	t.Cleanup(func() {
		exec(t, admin, "DROP OWNED BY "+role)
		exec(t, admin, "DROP ROLE "+role)
	})
	exec(t, admin, "GRANT USAGE ON SCHEMA "+sch+" TO "+role)
	conn := connect(t)
	exec(t, conn, "SET ROLE "+role)
	table := schema + ".dead_letters"

	err := deadletters.CreateTable(ctx, conn, table)
	if !errors.Is(err, slotstore.ErrPermission) || !strings.Contains(err.Error(), "GRANT CREATE ON SCHEMA "+sch+" TO "+role) {
		t.Fatalf("CreateTable without CREATE on the schema: err = %v; want ErrPermission naming GRANT CREATE ON SCHEMA %s TO %s", err, sch, role)
	}

	ddl, err := deadletters.TableDDL(table)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, admin, ddl)
	if err := deadletters.CreateTable(ctx, conn, table); err != nil {
		t.Errorf("CreateTable with the table made by its owner: %v; want nil (no CREATE needed)", err)
	}
}

// connect opens a normal connection that the test's cleanup closes.
func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(t.Context(), testenv.PGConfig(t))
	if err != nil {
		t.Fatalf("connect to CDC_RELAY_PG_URL: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// exec runs sql on conn, in a test or in its cleanup (after t.Context ended).
func exec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// newSchema creates schema, dropped with everything in it when the test ends, and returns it
// quoted.
func newSchema(t *testing.T, admin *pgx.Conn, schema string) string {
	t.Helper()
	sch := pgx.Identifier{schema}.Sanitize()
	exec(t, admin, "CREATE SCHEMA "+sch)
	t.Cleanup(func() { exec(t, admin, "DROP SCHEMA IF EXISTS "+sch+" CASCADE") })
	return sch
}
