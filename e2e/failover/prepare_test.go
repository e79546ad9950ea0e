package failover

import (
	"context"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// `slot create --failover` moves the new slot past a running-transactions record
// (PrepareFailoverSync) only when nothing up to there is to be published. It pins a peek that
// decoded with create's one publication while run may stream several: a row of another
// publication, committed after the slot was made, was passed by the advance and never
// published. The slot must stay before that row; with nothing to publish it moves, to the end
// of the logged record and no further. (PostgreSQL 16: pg_log_standby_snapshot; the failover
// flag itself does not matter to the advance.)
func TestPrepareFailoverSyncNeverPassesARowOfAnyPublication(t *testing.T) {
	c := newCluster(t, 16)
	ctx := context.Background()
	conn := c.connect(t, c.primary, db)
	defer conn.Close(ctx)
	for _, q := range []string{
		`CREATE TABLE prep_main (id bigserial primary key, v text)`, `CREATE TABLE prep_other (id bigserial primary key, v text)`,
		`CREATE PUBLICATION prep_main FOR TABLE prep_main WITH (publish = 'insert')`,
		`CREATE PUBLICATION "Prep_Other" FOR TABLE prep_other WITH (publish = 'insert')`,
		`SELECT pg_create_logical_replication_slot('prep_busy', 'pgoutput')`,
		`SELECT pg_create_logical_replication_slot('prep_idle', 'pgoutput')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	confirmed := func(slot string) pglogrepl.LSN {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s); err != nil {
			t.Fatal(err)
		}
		lsn, err := pglogrepl.ParseLSN(s)
		if err != nil {
			t.Fatal(err)
		}
		return lsn
	}
	idleBefore := confirmed("prep_idle")
	if _, err := conn.Exec(ctx, `INSERT INTO prep_other (v) VALUES ('run --publication prep_main,Prep_Other publishes me')`); err != nil {
		t.Fatal(err)
	}
	busyBefore := confirmed("prep_busy")
	store := slotstore.New(conn)
	advanced, err := store.PrepareFailoverSync(ctx, "prep_busy", []string{"prep_main"})
	if err != nil {
		t.Fatal(err)
	}
	if advanced || confirmed("prep_busy") != busyBefore {
		t.Errorf("advanced %v from %s to %s past a row of another publication", advanced, busyBefore, confirmed("prep_busy"))
	}

	// prep_idle has the same row to publish: dropping the row's publication leaves it nothing,
	// and then it moves.
	if _, err := conn.Exec(ctx, `DROP PUBLICATION "Prep_Other"`); err != nil {
		t.Fatal(err)
	}
	advanced, err = store.PrepareFailoverSync(ctx, "prep_idle", []string{"prep_main"})
	if err != nil || !advanced || confirmed("prep_idle") <= idleBefore {
		t.Errorf("a slot with nothing to publish: advanced %v (%v), confirmed %s -> %s", advanced, err, idleBefore, confirmed("prep_idle"))
	}
}
