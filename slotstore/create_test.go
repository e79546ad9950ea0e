package slotstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

func TestCreateMakesPublicationAndSlot(t *testing.T) {
	t.Parallel()
	e, ctx, store := withTable(t)
	res, err := store.Create(ctx, slotstore.CreateOptions{
		Slot: e.Slot, Publication: e.Pub, Tables: []string{e.Table}, // unqualified: schema public
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if !res.SlotCreated || !res.PublicationCreated || res.ConsistentPoint == 0 || res.TablesAdded != nil {
		t.Errorf("Create result = %+v, want both created, a consistent point, no TablesAdded", res)
	}

	var ins, upd, del, trunc, all bool
	if err := e.admin.QueryRow(ctx, `SELECT pubinsert, pubupdate, pubdelete, pubtruncate, puballtables
FROM pg_publication WHERE pubname = $1`, e.Pub).Scan(&ins, &upd, &del, &trunc, &all); err != nil {
		t.Fatalf("read pg_publication: %v", err)
	}
	if !ins || upd || del || trunc || all {
		t.Errorf("publication publishes insert=%v update=%v delete=%v truncate=%v all_tables=%v, want insert only",
			ins, upd, del, trunc, all)
	}
	if got, want := e.pubTables(t, e.Pub), []string{"public." + e.Table}; !slices.Equal(got, want) {
		t.Errorf("publication tables = %v, want %v", got, want)
	}

	var plugin, slotType, db, confirmed string
	var temporary bool
	if err := e.admin.QueryRow(ctx, `SELECT plugin, slot_type, database, temporary, confirmed_flush_lsn::text
FROM pg_replication_slots WHERE slot_name = $1`, e.Slot).Scan(&plugin, &slotType, &db, &temporary, &confirmed); err != nil {
		t.Fatalf("read pg_replication_slots: %v", err)
	}
	var curDB string
	if err := e.admin.QueryRow(ctx, `SELECT current_database()`).Scan(&curDB); err != nil {
		t.Fatal(err)
	}
	if plugin != "pgoutput" || slotType != "logical" || db != curDB || temporary {
		t.Errorf("slot plugin=%q type=%q database=%q temporary=%v, want pgoutput logical %q permanent",
			plugin, slotType, db, temporary, curDB)
	}
	if confirmed != res.ConsistentPoint.String() {
		t.Errorf("confirmed_flush_lsn = %s, want the consistent point %s", confirmed, res.ConsistentPoint)
	}
}

func TestCreateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	e, ctx, store := withTable(t)
	opts := slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{"public." + e.Table}}

	first, err := store.Create(ctx, opts)
	if err != nil {
		t.Fatalf("first Create: %v", err)
	}
	second, err := store.Create(ctx, opts)
	if err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if second.SlotCreated || second.PublicationCreated || second.ConsistentPoint != 0 || len(second.TablesAdded) != 0 {
		t.Errorf("second Create = %+v, want a no-op (nothing created, no consistent point, no tables added)", second)
	}
	st := status(t, ctx, store, e.Slot, "")
	if st.ConfirmedFlushLSN != first.ConsistentPoint {
		t.Errorf("confirmed_flush_lsn = %s after the second Create, want it untouched at %s",
			st.ConfirmedFlushLSN, first.ConsistentPoint)
	}
}

func TestCreateAddsMissingTable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	t1, t2 := e.table(1), e.table(2)
	e.createTable(t, t1)
	e.createTable(t, t2)
	ctx := testCtx(t)
	store := slotstore.New(connect(t))

	if _, err := store.Create(ctx, slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{t1}}); err != nil {
		t.Fatalf("Create with one table: %v", err)
	}
	res, err := store.Create(ctx, slotstore.CreateOptions{
		Slot: e.Slot, Publication: e.Pub, Tables: []string{"public." + t1, t2, "public." + t2}, // t2 twice
	})
	if err != nil {
		t.Fatalf("Create with two tables: %v", err)
	}
	if res.SlotCreated || res.PublicationCreated || !slices.Equal(res.TablesAdded, []string{"public." + t2}) {
		t.Errorf("Create = %+v, want only TablesAdded [public.%s]", res, t2)
	}
	if got, want := e.pubTables(t, e.Pub), []string{"public." + t1, "public." + t2}; !slices.Equal(got, want) {
		t.Errorf("publication tables = %v, want %v", got, want)
	}
}

func TestCreateNoTable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createTable(t, e.Table)
	e.exec(t, "CREATE VIEW public."+e.base+"_v AS SELECT 1 AS one")
	ctx := testCtx(t)
	store := slotstore.New(connect(t))

	for _, missing := range []string{e.table(1), "no_such_schema_xyz." + e.Table, strings.ToUpper(e.Table), e.base + "_v"} {
		_, err := store.Create(ctx, slotstore.CreateOptions{
			Slot: e.Slot, Publication: e.Pub, Tables: []string{e.Table, missing},
		})
		if !errors.Is(err, slotstore.ErrNoTable) {
			t.Errorf("Create with table %q: err = %v, want ErrNoTable", missing, err)
			continue
		}
		if !strings.Contains(err.Error(), missing) {
			t.Errorf("error %q does not name table %q", err, missing)
		}
	}
	if e.slotExists(t, e.Slot) || e.pubExists(t, e.Pub) {
		t.Errorf("a failed check created something: slot=%v publication=%v", e.slotExists(t, e.Slot), e.pubExists(t, e.Pub))
	}
}

func TestCreateSlotWithAnotherPlugin(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createTable(t, e.Table)
	e.exec(t, `SELECT pg_create_physical_replication_slot($1)`, e.Slot)

	_, err := slotstore.New(connect(t)).Create(testCtx(t), slotstore.CreateOptions{
		Slot: e.Slot, Publication: e.Pub, Tables: []string{e.Table},
	})
	if !errors.Is(err, slotstore.ErrSlotWrongPlugin) {
		t.Fatalf("Create over a physical slot: err = %v, want ErrSlotWrongPlugin", err)
	}
	if !strings.Contains(err.Error(), e.Slot) || !strings.Contains(err.Error(), "physical") {
		t.Errorf("error %q should name the slot and say it is physical", err)
	}
	if e.pubExists(t, e.Pub) {
		t.Error("Create made the publication although the slot check failed")
	}
}

func TestCreateRejectsBadNames(t *testing.T) {
	t.Parallel()
	store := slotstore.New(nil) // names are checked before the connection is used
	for _, o := range []slotstore.CreateOptions{
		{Slot: "Bad-Slot", Publication: "p"},
		{Slot: "s", Publication: ""},
		{Slot: "s", Publication: "p", Tables: []string{"a.b.c"}},
	} {
		if _, err := store.Create(testCtx(t), o); !errors.Is(err, outbox.ErrBadName) {
			t.Errorf("Create(%+v): err = %v, want ErrBadName", o, err)
		}
	}
}

// TestCreateFailoverNeeds17 asks for a failover slot: below PostgreSQL 17 (the suite's 15) it
// is refused before anything changes, with what to do instead; from 17 on the slot has failover
// on and the primary's failover check answers.
func TestCreateFailoverNeeds17(t *testing.T) {
	t.Parallel()
	e, ctx, store := withTable(t)
	var version int
	if err := e.admin.QueryRow(ctx, `SELECT current_setting('server_version_num')::int / 10000`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	res, err := store.Create(ctx, slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{e.Table}, Failover: true})
	if version < 17 {
		if !errors.Is(err, slotstore.ErrFailoverUnsupported) || !strings.Contains(err.Error(), "PostgreSQL 17 or later") {
			t.Fatalf("Create --failover on %d: %v, want ErrFailoverUnsupported saying 17 or later", version, err)
		}
		var n int
		if err := e.admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1) +
  (SELECT count(*) FROM pg_publication WHERE pubname = $2)`, e.Slot, e.Pub).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("refused Create left %d slot/publication behind, want none", n)
		}
		if _, err := store.CheckFailover(ctx); !errors.Is(err, slotstore.ErrFailoverUnsupported) {
			t.Errorf("CheckFailover on %d: %v, want ErrFailoverUnsupported", version, err)
		}
		return
	}
	if err != nil || !res.SlotCreated {
		t.Fatalf("Create --failover on %d: %+v, %v", version, res, err)
	}
	st, err := store.Status(ctx, e.Slot, "")
	if err != nil || st.Failover == nil || !*st.Failover {
		t.Fatalf("status of the failover slot: failover=%v, %v", st.Failover, err)
	}
	if _, err := store.CheckFailover(ctx); err != nil {
		t.Errorf("CheckFailover: %v", err)
	}
}

// A publication name with a $ after its first character is PostgreSQL's own (an unquoted
// identifier may hold it) and the stream's (replication.Config took it): Create, CheckRun and
// Drop take it too. slotstore refused it while the stream accepted it.
func TestCreateTakesAPublicationNameWithADollar(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createTable(t, e.Table)
	ctx := testCtx(t)
	pub := e.base + "$p"
	t.Cleanup(func() { _, _ = e.admin.Exec(testCtx(t), "DROP PUBLICATION IF EXISTS "+`"`+pub+`"`) })
	store := slotstore.New(connect(t))
	if _, err := store.Create(ctx, slotstore.CreateOptions{Slot: e.Slot, Publication: pub, Tables: []string{e.Table}}); err != nil {
		t.Fatalf("Create with publication %q: %v", pub, err)
	}
	if got, want := e.pubTables(t, pub), []string{"public." + e.Table}; !slices.Equal(got, want) {
		t.Errorf("publication %s tables = %v, want %v", pub, got, want)
	}
	if _, err := store.CheckRun(ctx, e.Slot, pub); err != nil {
		t.Errorf("CheckRun with publication %q: %v", pub, err)
	}
	if err := store.Drop(ctx, e.Slot, pub); err != nil || e.pubExists(t, pub) {
		t.Errorf("Drop with publication %q: %v (still there: %v)", pub, err, e.pubExists(t, pub))
	}
}
