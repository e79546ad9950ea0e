package slotstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

func TestCheckRun(t *testing.T) {
	t.Parallel()

	t.Run("ready", func(t *testing.T) {
		t.Parallel()
		e, ctx, store, _ := created(t)
		st, err := store.CheckRun(ctx, e.Slot, e.Pub)
		if err != nil {
			t.Fatalf("CheckRun: %v", err)
		}
		if st.Slot != e.Slot || st.WALStatus == "lost" || st.Publication == nil ||
			!slices.Equal(st.Publication.Tables, []string{"public." + e.Table}) {
			t.Errorf("CheckRun status = %+v (publication %+v)", st, st.Publication)
		}
	})

	t.Run("missing publication", func(t *testing.T) {
		t.Parallel()
		e, ctx, store, _ := created(t)
		e.exec(t, "DROP PUBLICATION "+e.Pub)
		st, err := store.CheckRun(ctx, e.Slot, e.Pub)
		if !errors.Is(err, slotstore.ErrPublicationMissing) {
			t.Fatalf("CheckRun without the publication: err = %v, want ErrPublicationMissing", err)
		}
		if !strings.Contains(err.Error(), e.Pub) || st.Slot != e.Slot {
			t.Errorf("error %q should name the publication, and the slot status (%q) should come with it", err, st.Slot)
		}
	})

	t.Run("empty publication", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		ctx := testCtx(t)
		e.exec(t, "CREATE PUBLICATION "+e.Pub+" WITH (publish = 'insert')")
		e.exec(t, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
		_, err := slotstore.New(connect(t)).CheckRun(ctx, e.Slot, e.Pub)
		if !errors.Is(err, slotstore.ErrPublicationEmpty) {
			t.Fatalf("CheckRun with a publication without tables: err = %v, want ErrPublicationEmpty", err)
		}
	})

	t.Run("publication without inserts", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.createTable(t, e.Table)
		ctx := testCtx(t)
		e.exec(t, "CREATE PUBLICATION "+e.Pub+" FOR TABLE public."+e.Table+" WITH (publish = 'update, delete')")
		e.exec(t, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.Slot)
		_, err := slotstore.New(connect(t)).CheckRun(ctx, e.Slot, e.Pub)
		if !errors.Is(err, slotstore.ErrPublicationNoInsert) || !strings.Contains(err.Error(), "update, delete") {
			t.Fatalf("CheckRun with an update/delete publication: err = %v, want ErrPublicationNoInsert naming what it publishes", err)
		}
	})

	t.Run("missing slot", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		_, err := slotstore.New(connect(t)).CheckRun(testCtx(t), e.Slot, e.Pub)
		if !errors.Is(err, slotstore.ErrSlotMissing) || !strings.Contains(err.Error(), "cdc-relay slot create") {
			t.Fatalf("CheckRun without the slot: err = %v, want ErrSlotMissing saying what to run", err)
		}
	})

	t.Run("physical slot", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.createTable(t, e.Table)
		e.exec(t, "CREATE PUBLICATION "+e.Pub+" FOR TABLE public."+e.Table+" WITH (publish = 'insert')")
		e.exec(t, `SELECT pg_create_physical_replication_slot($1)`, e.Slot)
		_, err := slotstore.New(connect(t)).CheckRun(testCtx(t), e.Slot, e.Pub)
		if !errors.Is(err, slotstore.ErrSlotWrongPlugin) {
			t.Fatalf("CheckRun on a physical slot: err = %v, want ErrSlotWrongPlugin", err)
		}
	})

	t.Run("publication name required", func(t *testing.T) {
		t.Parallel()
		if _, err := slotstore.New(nil).CheckRun(testCtx(t), "s", ""); !errors.Is(err, outbox.ErrBadName) {
			t.Fatalf("CheckRun without a publication: err = %v, want ErrBadName", err)
		}
	})
}
