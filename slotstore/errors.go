package slotstore

import (
	"errors"
	"fmt"

	"github.com/cdc-relay/cdc-relay/outbox"
)

var (
	// ErrSlotMissing means the replication slot does not exist.
	ErrSlotMissing = errors.New("replication slot does not exist")
	// ErrSlotActive means a process (normally another relay) holds the slot.
	// The error is a *SlotActiveError carrying the pid.
	ErrSlotActive = errors.New("replication slot is active")
	// ErrSlotLost means the server invalidated the slot (wal_status 'lost')
	// because it retained more WAL than max_slot_wal_keep_size allows.
	ErrSlotLost = errors.New("replication slot is lost")
	// ErrSlotWrongPlugin means the slot exists but is not a logical slot with
	// the pgoutput plugin.
	ErrSlotWrongPlugin = errors.New("replication slot does not use the pgoutput plugin")
	// ErrSlotWrongDatabase means the logical slot exists but was created in
	// another database than the one connected to.
	ErrSlotWrongDatabase = errors.New("replication slot belongs to another database")
	// ErrWalLevel means the server's wal_level is not logical.
	ErrWalLevel = errors.New("wal_level is not logical")
	// ErrNoPublication means the publication does not exist.
	ErrNoPublication = errors.New("publication does not exist")
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
	// ErrBadName means a slot, publication or table name is not acceptable.
	ErrBadName = outbox.ErrBadName // the same value as outbox.ParseTable's
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
