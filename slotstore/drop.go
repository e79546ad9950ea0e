package slotstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
)

// Drop drops the replication slot and, when publication is not "", the
// publication (DROP PUBLICATION IF EXISTS).
//
// A missing slot is ErrSlotMissing, a slot held by a process is a
// *SlotActiveError (ErrSlotActive) naming its pid, and a role that may not
// drop the slot or the publication is ErrPermission. On any of these,
// nothing has been dropped. The slot is dropped before the publication, so a
// failure in between leaves only a publication, which Create reuses.
func (s *Store) Drop(ctx context.Context, slot, publication string) error {
	if err := ValidateName("slot", slot); err != nil {
		return err
	}
	if publication != "" {
		if err := ValidateName("publication", publication); err != nil {
			return err
		}
	}
	ss, err := s.session(ctx)
	if err != nil {
		return err
	}
	row, found, err := s.lookupSlot(ctx, slot)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("slot %q: %w: nothing was dropped", slot, ErrSlotMissing)
	}
	if err := ss.checkReplication(slot, "drop a replication slot"); err != nil {
		return err
	}
	if row.Active {
		return &SlotActiveError{Slot: slot, PID: row.PID}
	}
	if publication != "" {
		pub, found, err := s.lookupPublication(ctx, publication)
		if err != nil {
			return err
		}
		if found && !pub.IsOwner {
			return fmt.Errorf("publication %q: %w: role %q cannot drop it: it is owned by %q; run as %q, "+
				"or as a superuser run: ALTER PUBLICATION %s OWNER TO %s", publication, ErrPermission, ss.Role, pub.Owner, pub.Owner,
				pgx.Identifier{publication}.Sanitize(), pgx.Identifier{ss.Role}.Sanitize())
		}
	}

	if _, err := s.conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
		switch said := slotfacts.ServerSays(err); {
		case said == ErrSlotActive: // a relay took the slot after the check
			if row, found, lerr := s.lookupSlot(ctx, slot); lerr == nil && found && row.Active {
				return &SlotActiveError{Slot: slot, PID: row.PID}
			}
			return fmt.Errorf("slot %q: %w: %w", slot, ErrSlotActive, err)
		case said == ErrSlotMissing: // dropped by someone else after the check
			return fmt.Errorf("slot %q: %w: %w", slot, ErrSlotMissing, err)
		case pgCode(err) == pgerrcode.InsufficientPrivilege:
			return fmt.Errorf("%w (server said: %w)", replicationDenied(slot, "drop a replication slot", ss.Role), err)
		}
		return fmt.Errorf("slot %q: drop replication slot: %w", slot, err)
	}
	if publication != "" {
		if _, err := s.conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{publication}.Sanitize()); err != nil {
			return ddlError("publication", publication, "drop publication (the slot was dropped)", ss.Role, err)
		}
	}
	return nil
}
