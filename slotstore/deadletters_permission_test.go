package slotstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// TestDeadLetterTablePermission runs CreateDeadLetterTable as a role without CREATE on the
// schema: the error names the grant on the table's schema, and once an owner made the table
// the role needs none. The table is qualified with the test's own schema (not in the role's
// search_path), so the shared database's public schema, where the default table may already
// exist, is not involved.
func TestDeadLetterTablePermission(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := testCtx(t)
	schema := e.Role + "_sch"
	sch, role := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{e.Role}.Sanitize()
	e.exec(t, "DROP SCHEMA IF EXISTS "+sch+" CASCADE")
	e.exec(t, "CREATE SCHEMA "+sch)
	t.Cleanup(func() { _, _ = e.admin.Exec(testCtx(t), "DROP SCHEMA IF EXISTS "+sch+" CASCADE") })
	conn := e.roleConn(t, "NOLOGIN NOSUPERUSER")
	e.exec(t, "GRANT USAGE ON SCHEMA "+sch+" TO "+role)
	store := slotstore.New(conn)
	table := schema + ".dead_letters"

	err := store.CreateDeadLetterTable(ctx, table)
	if !errors.Is(err, slotstore.ErrPermission) || !strings.Contains(err.Error(), "GRANT CREATE ON SCHEMA "+sch+" TO "+role) {
		t.Fatalf("CreateDeadLetterTable without CREATE on the schema: err = %v; want ErrPermission naming GRANT CREATE ON SCHEMA %s TO %s", err, sch, role)
	}

	ddl, err := slotstore.DeadLetterTableDDL(table)
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, ddl)
	if err := store.CreateDeadLetterTable(ctx, table); err != nil {
		t.Errorf("CreateDeadLetterTable with the table made by its owner: %v; want nil (no CREATE needed)", err)
	}
}
