package slotfacts_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/slotstore"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Lookup reads the same slot over a normal connection (slotstore's) and over a replication
// connection (the stream's, which takes only simple queries), and says so when it is missing.
func TestLookupOverBothConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := testenv.PGConfig(t)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) }) // after the slot's drop below: cleanups run last first
	slot := testenv.Name(t)
	var lsn string
	if err := conn.QueryRow(ctx, `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`, slot).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			t.Errorf("drop the test's slot %s (it would hold WAL and one of max_replication_slots): %v", slot, err)
		}
	})

	rc := cfg.Config.Copy()
	rc.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close(context.Background())

	normal, found, err := slotfacts.Lookup(ctx, conn.PgConn(), slot)
	if err != nil || !found {
		t.Fatalf("Lookup over a normal connection: %+v, %v, %v", normal, found, err)
	}
	if normal.Type != "logical" || normal.Plugin != "pgoutput" || !normal.SameDatabase || normal.Database != cfg.Database ||
		normal.Active || normal.PID != 0 || !normal.HasConfirmed || normal.Confirmed.String() != lsn || normal.WALStatus == "" {
		t.Errorf("Lookup over a normal connection = %+v; want an inactive logical pgoutput slot of %s confirmed at %s", normal, cfg.Database, lsn)
	}
	overRepl, found, err := slotfacts.Lookup(ctx, repl, slot)
	if err != nil || !found || overRepl != normal {
		t.Errorf("Lookup over a replication connection = %+v, %v, %v; want %+v", overRepl, found, err, normal)
	}

	if s, found, err := slotfacts.Lookup(ctx, repl, slot+"_none"); err != nil || found {
		t.Errorf("Lookup of a missing slot = %+v, %v, %v; want not found", s, found, err)
	}
	if _, _, err := slotfacts.Lookup(ctx, repl, "x'; SELECT 1; --"); !errors.Is(err, slotfacts.ErrBadName) {
		t.Errorf("Lookup of a name no slot can have: %v, want ErrBadName before any query", err)
	}
}

// The stream (replication) wraps slotfacts' sentinels and slotstore names the same values: a
// caller that holds the stream's error and asks slotstore's sentinel (cmd's exit codes,
// cutover) gets the right answer. Each package once defined its own ErrSlotMissing, and its
// own "publication does not exist", with the same text and another value.
func TestReplicationAndSlotstoreShareTheSlotSentinels(t *testing.T) {
	for _, tc := range []struct {
		name         string
		repl, store  error
		slotfactsErr error
	}{
		{"missing", slotfacts.ErrSlotMissing, slotstore.ErrSlotMissing, slotfacts.ErrSlotMissing},
		{"active", slotfacts.ErrSlotActive, slotstore.ErrSlotActive, slotfacts.ErrSlotActive},
		{"lost", slotfacts.ErrSlotLost, slotstore.ErrSlotLost, slotfacts.ErrSlotLost},
		{"wrong plugin", slotfacts.ErrSlotWrongPlugin, slotstore.ErrSlotWrongPlugin, slotfacts.ErrSlotWrongPlugin},
		{"publication missing", slotfacts.ErrPublicationMissing, slotstore.ErrPublicationMissing, slotfacts.ErrPublicationMissing},
	} {
		wrapped := fmt.Errorf("stream: %w", tc.repl)
		if !errors.Is(wrapped, tc.store) || !errors.Is(fmt.Errorf("store: %w", tc.store), tc.repl) || tc.repl != tc.slotfactsErr {
			t.Errorf("%s: replication's and slotstore's sentinels are different values", tc.name)
		}
	}
	if !errors.Is(slotstore.ValidateName("publication", "$p"), slotfacts.ErrBadName) {
		t.Error("slotstore's name errors do not wrap slotfacts.ErrBadName")
	}
}

// The stream and `slot create` take the same publication names: a $ after the first
// character is PostgreSQL's (an unquoted identifier may hold it); slotstore refused it.
func TestReplicationAndSlotstoreShareTheNameRules(t *testing.T) {
	for _, name := range []string{"pub$1", "cdc_pub", "$pub", "Pub", "1pub"} {
		replErr := replication.Config{Slot: "s", Publications: []string{name}}.Validate()
		replOK := replErr == nil || !errors.Is(replErr, slotfacts.ErrBadName)
		storeOK := slotstore.ValidateName("publication", name) == nil
		if replOK != storeOK {
			t.Errorf("publication %q: replication accepts it %v, slotstore %v (replication: %v)", name, replOK, storeOK, replErr)
		}
	}
}
