package slotstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// createPartitioned makes e.Table a partitioned outbox with partitions e.table(1) and e.table(2).
func (e *env) createPartitioned(t *testing.T) {
	t.Helper()
	root := pgx.Identifier{"public", e.Table}.Sanitize()
	e.exec(t, `CREATE TABLE `+root+` (id bigserial, aggregate_id text, topic text, payload jsonb,
		created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id)) PARTITION BY RANGE (id)`)
	e.exec(t, `CREATE TABLE `+pgx.Identifier{"public", e.table(1)}.Sanitize()+` PARTITION OF `+root+` FOR VALUES FROM (1) TO (1000)`)
	e.exec(t, `CREATE TABLE `+pgx.Identifier{"public", e.table(2)}.Sanitize()+` PARTITION OF `+root+` FOR VALUES FROM (1000) TO (2000)`)
}

func (e *env) viaRoot(t *testing.T) bool {
	t.Helper()
	var v bool
	if err := e.admin.QueryRow(testCtx(t), `SELECT pubviaroot FROM pg_publication WHERE pubname = $1`, e.Pub).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Create publishes a partitioned table through its root, and a second Create is a no-op (it
// was 42710: the root is not in pg_publication_tables while partitions are published).
func TestCreatePublishesAPartitionedTableThroughItsRoot(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createPartitioned(t)
	ctx, store := testCtx(t), slotstore.New(connect(t))
	opts := slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{e.Table}}
	res, err := store.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.PublicationCreated || !res.ViaRoot || !e.viaRoot(t) {
		t.Errorf("Create = %+v, pubviaroot %v; want the publication created through the root", res, e.viaRoot(t))
	}
	if got, want := e.pubTables(t, e.Pub), []string{"public." + e.Table}; !slices.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
	res, err = store.Create(ctx, opts)
	if err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if res.PublicationCreated || res.SlotCreated || res.ViaRootSet || len(res.TablesAdded) > 0 {
		t.Errorf("second Create = %+v, want a no-op", res)
	}
	if _, err := store.CheckRun(ctx, e.Slot, e.Pub); err != nil {
		t.Errorf("CheckRun: %v", err)
	}
}

// A hand-made publication of a partitioned table without the root setting: CheckRun refuses
// it with the statement that fixes it, Create repairs it (a no-op afterwards), and only the
// publication's owner may; a partition named on its own is no reason to refuse.
func TestAPartitionedTablePublishedThroughItsPartitionsIsRefusedAndRepaired(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createPartitioned(t)
	ctx := testCtx(t)
	pub := pgx.Identifier{e.Pub}.Sanitize()
	e.exec(t, `CREATE PUBLICATION `+pub+` FOR TABLE `+pgx.Identifier{"public", e.Table}.Sanitize()+` WITH (publish = 'insert')`)
	e.exec(t, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
	store := slotstore.New(connect(t))

	_, err := store.CheckRun(ctx, e.Slot, e.Pub)
	fix := `ALTER PUBLICATION ` + pub + ` SET (publish_via_partition_root = true)`
	if !errors.Is(err, slotstore.ErrPublicationNotViaRoot) || !strings.Contains(err.Error(), fix) || !strings.Contains(err.Error(), "public."+e.Table) {
		t.Fatalf("CheckRun: err = %v, want ErrPublicationNotViaRoot naming the table and %q", err, fix)
	}

	// Another role, which does not own the publication, may not repair it.
	roleStore := slotstore.New(e.roleConn(t, "NOLOGIN NOSUPERUSER REPLICATION"))
	opts := slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{e.Table}}
	if _, err := roleStore.Create(ctx, opts); !errors.Is(err, slotstore.ErrPermission) || !strings.Contains(err.Error(), fix) {
		t.Errorf("Create by a role not owning the publication: err = %v, want ErrPermission with %q", err, fix)
	}
	if e.viaRoot(t) {
		t.Fatal("a refused Create changed the publication")
	}

	res, err := store.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if !res.ViaRootSet || !res.ViaRoot || len(res.TablesAdded) > 0 || !e.viaRoot(t) {
		t.Errorf("Create = %+v, pubviaroot %v; want the setting turned on and nothing added", res, e.viaRoot(t))
	}
	if _, err := store.CheckRun(ctx, e.Slot, e.Pub); err != nil {
		t.Errorf("CheckRun after the repair: %v", err)
	}
	if res, err = store.Create(ctx, opts); err != nil || res.ViaRootSet {
		t.Errorf("Create again = %+v, %v; want a no-op", res, err)
	}

	// A publication of one partition alone publishes it under its own name, as asked.
	e.exec(t, `DROP PUBLICATION `+pub)
	e.exec(t, `CREATE PUBLICATION `+pub+` FOR TABLE `+pgx.Identifier{"public", e.table(1)}.Sanitize()+` WITH (publish = 'insert')`)
	if _, err := store.CheckRun(ctx, e.Slot, e.Pub); err != nil {
		t.Errorf("CheckRun of a publication naming one partition: %v", err)
	}
}
