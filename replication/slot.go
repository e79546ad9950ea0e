package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
)

// checkSlot reads the slot over the replication connection (replication=database accepts
// simple queries), refuses a missing, lost or foreign slot, and returns where to start: the
// slot's own confirmed position, even when this process already confirmed more (DESIGN.md,
// "Every session starts from the slot's own confirmed_flush_lsn").
func (s *Stream) checkSlot(ctx context.Context) (pglogrepl.LSN, error) {
	slot, found, err := slotfacts.Lookup(ctx, s.conn, s.cfg.Slot)
	if err != nil {
		return 0, err
	}
	if !found || !slot.SameDatabase {
		if f := s.Flushed(); f != 0 && s.nowTL != s.timeline {
			return 0, fmt.Errorf("%w: slot %q is not on this server, which is on timeline %d while the relay started on timeline %d: "+
				"a standby was promoted and the slot stayed on the old primary (before PostgreSQL 17 no logical slot moves to a "+
				"standby; on 17+ a slot made with `cdc-relay slot create --failover` does, on a standby with slot sync). "+
				"The relay had confirmed %s there. To recover without loss (docs/failover.md): "+
				"1. run `cdc-relay cutover --slot %s --publication ... --table ...` against the new primary: it creates the slot "+
				"and publishes every pending outbox row committed before it, the rows the relay had not confirmed among them "+
				"(duplicates, never loss); 2. then start `cdc-relay run` again (never before cutover finished)",
				slotfacts.ErrSlotMissing, s.cfg.Slot, s.nowTL, s.timeline, f, s.cfg.Slot)
		}
		if f := s.Flushed(); f != 0 {
			return 0, fmt.Errorf("%w: slot %q was dropped while this relay used it (it had confirmed %s): re-create it with "+
				"`cdc-relay slot create --slot %s --publication ...`; rows committed after %s are not in a new slot: "+
				"republish them from the outbox table (e.g. with cdc-relay poll)", slotfacts.ErrSlotMissing, s.cfg.Slot, f, s.cfg.Slot, f)
		}
		return 0, fmt.Errorf("%w: slot %q in this database (create it with `cdc-relay slot create --slot %s --publication ...`)",
			slotfacts.ErrSlotMissing, s.cfg.Slot, s.cfg.Slot)
	}
	if slot.Plugin != "pgoutput" {
		return 0, fmt.Errorf("%w: slot %q uses %q", slotfacts.ErrSlotWrongPlugin, s.cfg.Slot, slot.Plugin)
	}
	if slot.WALStatus == "lost" {
		return 0, slotLostError(s.cfg.Slot, "its wal_status is lost: it held back more WAL than max_slot_wal_keep_size allows, and PostgreSQL removed WAL it still needed", errors.New("wal_status is lost"))
	}
	if slot.PID != 0 && uint32(slot.PID) != s.conn.PID() {
		return 0, fmt.Errorf("%w: slot %q is active for PID %d", slotfacts.ErrSlotActive, s.cfg.Slot, slot.PID)
	}
	if !slot.HasConfirmed {
		return 0, fmt.Errorf("read slot %q: it has no confirmed_flush_lsn", s.cfg.Slot)
	}
	lsn := slot.Confirmed
	// Start from the slot's own position, never from a higher one this process remembers: after
	// a failover the new primary's slot may be behind it, and starting ahead would skip what lies
	// between. Replay is allowed, loss is not. Reporting exactly the slot's position is also safe
	// on servers that take a reported flush position without checking that it moves forward.
	if f := s.Flushed(); f > lsn {
		s.log.Warn("the slot is behind what this relay confirmed: replaying from the slot's position (duplicates, no loss)",
			"slot_confirmed", lsn, "relay_confirmed", f)
	}
	s.flushed.Store(uint64(lsn))
	s.sent = lsn
	return lsn, nil
}
