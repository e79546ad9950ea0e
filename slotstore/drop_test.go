package slotstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

func TestDropRemovesSlotAndPublication(t *testing.T) {
	t.Parallel()
	e, ctx, store := withTable(t)
	opts := slotstore.CreateOptions{Slot: e.Slot, Publication: e.Pub, Tables: []string{e.Table}}

	if _, err := store.Create(ctx, opts); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := store.Drop(ctx, e.Slot, ""); err != nil {
		t.Fatalf("Drop slot only: %v", err)
	}
	if e.slotExists(t, e.Slot) || !e.pubExists(t, e.Pub) {
		t.Fatalf("after Drop(slot, \"\"): slot exists=%v publication exists=%v, want false true",
			e.slotExists(t, e.Slot), e.pubExists(t, e.Pub))
	}

	res, err := store.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create again: %v", err)
	}
	if !res.SlotCreated || res.PublicationCreated {
		t.Errorf("Create again = %+v, want the slot re-created and the publication reused", res)
	}
	if err := store.Drop(ctx, e.Slot, e.Pub); err != nil {
		t.Fatalf("Drop slot and publication: %v", err)
	}
	if e.slotExists(t, e.Slot) || e.pubExists(t, e.Pub) {
		t.Errorf("after Drop(slot, pub): slot exists=%v publication exists=%v, want both gone",
			e.slotExists(t, e.Slot), e.pubExists(t, e.Pub))
	}

	err = store.Drop(ctx, e.Slot, e.Pub)
	if !errors.Is(err, slotstore.ErrSlotMissing) || !strings.Contains(err.Error(), e.Slot) {
		t.Errorf("Drop of a missing slot: err = %v, want ErrSlotMissing naming the slot", err)
	}
}

func TestDropActiveSlot(t *testing.T) {
	t.Parallel()
	e, ctx, store, _ := created(t)

	// Hold the slot the way a relay does: a replication connection streaming from it.
	cfg, err := pgconn.ParseConfig(e.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("replication connection (needs a pg_hba.conf replication entry): %v", err)
	}
	closeRepl := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = repl.Close(cctx)
	}
	t.Cleanup(closeRepl)
	err = pglogrepl.StartReplication(ctx, repl, e.Slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", e.Pub)},
	})
	if err != nil {
		t.Fatalf("StartReplication: %v", err)
	}

	st := status(t, ctx, store, e.Slot, "")
	if !st.Active || st.ActivePID == 0 {
		t.Fatalf("status of a streamed slot: active=%v pid=%d, want active with a pid", st.Active, st.ActivePID)
	}

	err = store.Drop(ctx, e.Slot, e.Pub)
	if !errors.Is(err, slotstore.ErrSlotActive) {
		t.Fatalf("Drop of an active slot: err = %v, want ErrSlotActive", err)
	}
	var active *slotstore.SlotActiveError
	if !errors.As(err, &active) || active.PID != st.ActivePID || active.Slot != e.Slot {
		t.Errorf("err = %#v, want a *SlotActiveError for slot %q pid %d", err, e.Slot, st.ActivePID)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(st.ActivePID)) || !strings.Contains(msg, "stop") {
		t.Errorf("error %q should name pid %d and say to stop the holder first", msg, st.ActivePID)
	}
	if !e.slotExists(t, e.Slot) || !e.pubExists(t, e.Pub) {
		t.Error("a refused Drop removed something")
	}

	// Once the holder is gone, Drop succeeds.
	closeRepl()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := status(t, ctx, store, e.Slot, "")
		if !st.Active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot still active (pid %d) 15s after the replication connection closed", st.ActivePID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := store.Drop(ctx, e.Slot, e.Pub); err != nil {
		t.Fatalf("Drop after the holder left: %v", err)
	}
	if e.slotExists(t, e.Slot) || e.pubExists(t, e.Pub) {
		t.Error("Drop left the slot or the publication behind")
	}
}
