package deadletters_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/internal/testenv"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// TestDeadLetterTablePermission runs CreateTable as a role without CREATE on the schema: the
// error names the grant on the table's schema, and once an owner made the table the role
// needs none. The table is qualified with the test's own schema (not in the role's
// search_path), so the shared database's public schema, where the default table may already
// exist, is not involved.
func TestDeadLetterTablePermission(t *testing.T) {
	t.Parallel()
	admin := connect(t)
	ctx := testCtx(t)
	name := testenv.Name(t)
	schema := name + "_sch"
	sch, role := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{name}.Sanitize()
	exec(t, admin, "CREATE SCHEMA "+sch)
	exec(t, admin, "CREATE ROLE "+role+" NOLOGIN NOSUPERUSER")
	t.Cleanup(func() {
		exec(t, admin, "DROP SCHEMA IF EXISTS "+sch+" CASCADE")
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
