package slotfacts

import "errors"

// The slot's and publication's sentinels, one value each, which replication wraps and
// slotstore gives their one public name (the same identifier), so that errors.Is holds
// across the stream, the preflight and the slot commands.
var (
	// ErrSlotMissing means the replication slot does not exist (in this database).
	ErrSlotMissing = errors.New("replication slot does not exist")
	// ErrSlotActive means a process (normally another relay) holds the slot: `run` waits as a
	// standby, `slot drop` refuses.
	ErrSlotActive = errors.New("replication slot is held by another process")
	// ErrSlotLost means the server invalidated the slot (wal_status 'lost': WAL removed past
	// max_slot_wal_keep_size, or on 17+ catalog rows removed, wal_level lowered, the idle
	// timeout): it cannot stream again, and events written since its position may be gone.
	ErrSlotLost = errors.New("replication slot was invalidated")
	// ErrSlotWrongPlugin means the slot exists but is not a logical slot with the pgoutput plugin.
	ErrSlotWrongPlugin = errors.New("replication slot does not use the pgoutput plugin")
	// ErrPublicationMissing means a publication the relay was given does not exist.
	ErrPublicationMissing = errors.New("publication does not exist")
)
