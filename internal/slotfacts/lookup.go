package slotfacts

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// Slot is a row of pg_replication_slots, as Lookup reads it.
type Slot struct {
	Type         string // logical or physical
	Plugin       string // "" for a physical slot
	Database     string // "" for a physical slot
	SameDatabase bool   // Database is the connection's current_database()
	Active       bool
	PID          int32         // active_pid, 0 when none
	Confirmed    pglogrepl.LSN // confirmed_flush_lsn; 0 when NULL (HasConfirmed false)
	HasConfirmed bool
	WALStatus    string // "" when NULL
	Failover     bool   // PostgreSQL 17+; false below
}

// lookupQuery reads one slot. The slot name is a literal, because a replication connection
// takes no bind parameters; Lookup checks it against CheckSlotName first, so it holds nothing
// to quote. failover is a column from PostgreSQL 17 on; to_jsonb reads it where it exists.
const lookupQuery = `SELECT slot_type, coalesce(plugin::text, ''), coalesce(database::text, ''),
       coalesce(database = current_database(), false), active, coalesce(active_pid, 0),
       coalesce(confirmed_flush_lsn::text, ''), coalesce(wal_status, ''),
       coalesce((to_jsonb(s) ->> 'failover')::bool, false)
FROM pg_replication_slots s WHERE slot_name = '%s'`

// Lookup reads slot from pg_replication_slots over conn (a normal connection's PgConn, or a
// replication connection: it uses the simple query protocol); found is false when it does
// not exist, in any database. A name CheckSlotName refuses is that error, before any query.
func Lookup(ctx context.Context, conn *pgconn.PgConn, slot string) (s Slot, found bool, err error) {
	if err := CheckSlotName(slot); err != nil {
		return Slot{}, false, err
	}
	res, err := conn.Exec(ctx, fmt.Sprintf(lookupQuery, slot)).ReadAll()
	if err != nil {
		return Slot{}, false, fmt.Errorf("slot %q: read pg_replication_slots: %w", slot, err)
	}
	if len(res) != 1 || len(res[0].Rows) == 0 {
		return Slot{}, false, nil
	}
	row := res[0].Rows[0]
	if len(row) != 9 {
		return Slot{}, false, fmt.Errorf("slot %q: read pg_replication_slots: %d columns, want 9", slot, len(row))
	}
	s = Slot{Type: string(row[0]), Plugin: string(row[1]), Database: string(row[2]),
		SameDatabase: string(row[3]) == "t", Active: string(row[4]) == "t", WALStatus: string(row[7]), Failover: string(row[8]) == "t"}
	pid, err := strconv.ParseInt(string(row[5]), 10, 32)
	if err != nil {
		return Slot{}, false, fmt.Errorf("slot %q: read pg_replication_slots: active_pid %q: %w", slot, row[5], err)
	}
	s.PID = int32(pid)
	if c := string(row[6]); c != "" {
		if s.Confirmed, err = pglogrepl.ParseLSN(c); err != nil {
			return Slot{}, false, fmt.Errorf("slot %q: read pg_replication_slots: confirmed_flush_lsn %q: %w", slot, c, err)
		}
		s.HasConfirmed = true
	}
	return s, true, nil
}
