package slotstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// TestPermission runs as a non-superuser role and checks that each missing
// privilege is named, and that a failed check changes nothing. The steps
// share one role and run in order, because GRANT on the database is not safe
// to run concurrently with itself.
func TestPermission(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := testCtx(t)
	role := pgx.Identifier{e.Role}.Sanitize()
	store := slotstore.New(e.roleConn(t, "NOLOGIN NOSUPERUSER NOREPLICATION"))
	var db string
	if err := e.admin.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	e.createTable(t, e.Table) // owned by the test's superuser, not by the role
	opts := slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{e.Table}}

	expect := func(step string, err error, wants ...string) {
		t.Helper()
		if !errors.Is(err, slotstore.ErrPermission) {
			t.Fatalf("%s: err = %v, want ErrPermission", step, err)
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", step, err, w)
			}
		}
		if e.slotExists(t, e.Slot) || e.pubExists(t, e.Pub) {
			t.Fatalf("%s: a failed check created something", step)
		}
	}

	// No REPLICATION: the slot check names the attribute and the fix.
	_, err := store.Create(ctx, opts)
	expect("Create without REPLICATION", err, "REPLICATION", "ALTER ROLE "+role+" REPLICATION")

	// With REPLICATION but no CREATE on the database.
	e.exec(t, "ALTER ROLE "+role+" REPLICATION")
	_, err = store.Create(ctx, opts)
	expect("Create without CREATE on the database", err, "CREATE on database", "GRANT CREATE ON DATABASE")

	// With CREATE on the database but not owning the table.
	e.exec(t, "GRANT CREATE ON DATABASE "+pgx.Identifier{db}.Sanitize()+" TO "+role)
	_, err = store.Create(ctx, opts)
	expect("Create without owning the table", err, "owner of a table", "OWNER TO "+role, e.Table)

	// Owning the table, everything is in place.
	e.exec(t, "ALTER TABLE public."+e.Table+" OWNER TO "+role)
	res, err := store.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create with all privileges: %v", err)
	}
	if !res.SlotCreated || !res.PublicationCreated {
		t.Errorf("Create with all privileges = %+v, want both created", res)
	}
	if _, err := store.CheckRun(ctx, e.Slot, e.Pub); err != nil {
		t.Errorf("CheckRun with REPLICATION: %v", err)
	}

	// REPLICATION taken away: run and drop are refused, naming it.
	e.exec(t, "ALTER ROLE "+role+" NOREPLICATION")
	_, err = store.CheckRun(ctx, e.Slot, e.Pub)
	if !errors.Is(err, slotstore.ErrPermission) || !strings.Contains(err.Error(), "REPLICATION") {
		t.Errorf("CheckRun without REPLICATION: err = %v, want ErrPermission naming REPLICATION", err)
	}
	err = store.Drop(ctx, e.Slot, e.Pub)
	if !errors.Is(err, slotstore.ErrPermission) || !strings.Contains(err.Error(), "REPLICATION") {
		t.Errorf("Drop without REPLICATION: err = %v, want ErrPermission naming REPLICATION", err)
	}
	if !e.slotExists(t, e.Slot) || !e.pubExists(t, e.Pub) {
		t.Error("a refused Drop removed something")
	}
}

// TestPermissionPublicationOwner checks that a role which may not alter or
// drop another role's publication is told whose it is and what to run.
func TestPermissionPublicationOwner(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := testCtx(t)
	role := pgx.Identifier{e.Role}.Sanitize()
	t1, t2 := e.table(1), e.table(2)
	e.createTable(t, t1)
	e.createTable(t, t2)
	// The publication and the slot exist, made by the superuser; the role
	// has REPLICATION and owns the table it wants to add.
	e.exec(t, "CREATE PUBLICATION "+e.Pub+" FOR TABLE public."+t1+" WITH (publish = 'insert')")
	e.exec(t, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	store := slotstore.New(e.roleConn(t, "NOLOGIN NOSUPERUSER REPLICATION"))
	e.exec(t, "ALTER TABLE public."+t2+" OWNER TO "+role)

	res, err := store.Create(ctx, slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{t1}})
	if err != nil || res.SlotCreated || res.PublicationCreated || len(res.TablesAdded) != 0 {
		t.Errorf("Create with nothing to change = %+v, %v; want a no-op even without ownership", res, err)
	}
	_, err = store.Create(ctx, slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{t1, t2}})
	if !errors.Is(err, slotstore.ErrPermission) || !strings.Contains(err.Error(), "ALTER PUBLICATION "+pgx.Identifier{e.Pub}.Sanitize()) {
		t.Errorf("Create adding a table to another role's publication: err = %v, want ErrPermission with ALTER PUBLICATION ... OWNER TO", err)
	}
	if got := e.pubTables(t, e.Pub); len(got) != 1 {
		t.Errorf("publication tables = %v, want unchanged", got)
	}
	err = store.Drop(ctx, e.Slot, e.Pub)
	if !errors.Is(err, slotstore.ErrPermission) || !strings.Contains(err.Error(), "owned by") {
		t.Errorf("Drop of another role's publication: err = %v, want ErrPermission naming the owner", err)
	}
	if !e.slotExists(t, e.Slot) {
		t.Error("a refused Drop removed the slot")
	}
}
