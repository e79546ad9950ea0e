package slotstore

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
)

// The slot's and publication's sentinels are slotfacts' values, and these are their one
// public name: the stream (replication) wraps the same values, so
// errors.Is(err, slotstore.ErrSlotMissing) holds for its errors too. A bad name's error is
// outbox.ErrBadName.
var (
	// ErrSlotMissing means the replication slot does not exist.
	ErrSlotMissing = slotfacts.ErrSlotMissing
	// ErrSlotActive means a process (normally another relay) holds the slot.
	// The error is a *SlotActiveError carrying the pid.
	ErrSlotActive = slotfacts.ErrSlotActive
	// ErrSlotLost means the server invalidated the slot (wal_status 'lost'):
	// it retained more WAL than max_slot_wal_keep_size allows, or, on 17+, for
	// the invalidation_reason LostCause explains.
	ErrSlotLost = slotfacts.ErrSlotLost
	// ErrSlotWrongPlugin means the slot exists but is not a logical slot with
	// the pgoutput plugin.
	ErrSlotWrongPlugin = slotfacts.ErrSlotWrongPlugin
	// ErrSlotWrongDatabase means the logical slot exists but was created in
	// another database than the one connected to.
	ErrSlotWrongDatabase = errors.New("replication slot belongs to another database")
	// ErrWalLevel means the server's wal_level is not logical.
	ErrWalLevel = errors.New("wal_level is not logical")
	// ErrPublicationMissing means the publication does not exist.
	ErrPublicationMissing = slotfacts.ErrPublicationMissing
	// ErrPublicationEmpty means the publication contains no table.
	ErrPublicationEmpty = errors.New("publication has no tables")
	// ErrPublicationNoInsert means the publication does not publish inserts,
	// so the relay would receive no outbox rows.
	ErrPublicationNoInsert = errors.New("publication does not publish inserts")
	// ErrNoTable means a requested table does not exist (or is not a table).
	ErrNoTable = errors.New("table does not exist")
	// ErrPermission means the connected role lacks a privilege, an ownership
	// or a role attribute the operation needs; the message names it.
	ErrPermission = errors.New("insufficient privilege")
)

// SlotActiveError reports that a process holds the replication slot, so it
// cannot be dropped. It unwraps to ErrSlotActive.
type SlotActiveError struct {
	Slot string
	PID  int32 // the backend pid holding the slot (pg_replication_slots.active_pid)
}

func (e *SlotActiveError) Error() string {
	return fmt.Sprintf("slot %q: replication slot is active: held by pid %d; stop the cdc-relay (or other consumer) "+
		"using it first, or end it with SELECT pg_terminate_backend(%d)", e.Slot, e.PID, e.PID)
}

// Unwrap returns ErrSlotActive.
func (e *SlotActiveError) Unwrap() error { return ErrSlotActive }

// LostCause says what invalidated a lost slot and what to change so that it does not happen
// again, from the server's invalidation_reason (PostgreSQL 17+; nil before, where a slot the
// relay reads on a primary is lost only by WAL removal). keepSize is max_slot_wal_keep_size as
// the server shows it ("": not known).
func LostCause(reason *string, keepSize string) (what, prevent string) {
	r := ""
	if reason != nil {
		r = *reason
	}
	switch r {
	case "", "wal_removed":
		if keepSize != "" {
			keepSize = " (" + keepSize + ")"
		}
		return fmt.Sprintf("it held back more WAL than max_slot_wal_keep_size%s allows, and PostgreSQL removed that WAL (invalidation_reason %s)", keepSize, cmp.Or(r, "not shown before PostgreSQL 17")),
			"raise max_slot_wal_keep_size, or keep the relay running and caught up (cdc_relay_slot_retained_wal_bytes warns first)"
	case "rows_removed":
		return "VACUUM on the primary removed catalog rows the slot still needed to decode (invalidation_reason rows_removed: a slot on a standby, or synchronized to one, whose primary did not know of it)",
			"on the standby set hot_standby_feedback = on and stream from the primary through a physical slot (primary_slot_name), so that the primary keeps those rows"
	case "wal_level_insufficient":
		return "the primary's wal_level was lowered below logical, so its WAL can no longer be decoded (invalidation_reason wal_level_insufficient)",
			"set wal_level = logical on the primary again and restart it"
	case "idle_timeout":
		return "nothing streamed from it for longer than idle_replication_slot_timeout (invalidation_reason idle_timeout)",
			"keep a relay running on the slot, or raise idle_replication_slot_timeout (0 disables it)"
	}
	return fmt.Sprintf("PostgreSQL invalidated it (invalidation_reason %s)", r), "see the server's log and the PostgreSQL documentation of pg_replication_slots.invalidation_reason"
}
