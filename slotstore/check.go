package slotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrPublicationNotViaRoot means the publication holds a partitioned table without
// publish_via_partition_root: its rows would be published under the partitions' names.
var ErrPublicationNotViaRoot = errors.New("publication publishes a partitioned table through its partitions")

// CheckRun verifies what `cdc-relay run` needs before it streams:
// wal_level = logical (ErrWalLevel), a role that may stream (REPLICATION or
// SUPERUSER, else ErrPermission), the slot exists (ErrSlotMissing) as a
// pgoutput slot of this database (ErrSlotWrongPlugin, ErrSlotWrongDatabase)
// and is not lost (ErrSlotLost), and the publication exists
// (ErrPublicationMissing), publishes inserts (ErrPublicationNoInsert), publishes a
// partitioned table through its root (ErrPublicationNotViaRoot) and contains
// at least one table (ErrPublicationEmpty).
//
// It does not fail on an active slot: Status.Active says whether another
// relay holds it, and run waits as a standby. It returns the slot status with
// the publication; when a check fails after the slot was read, the error
// comes with the status read so far.
func (s *Store) CheckRun(ctx context.Context, slot, publication string) (Status, error) {
	if err := ValidateName("slot", slot); err != nil {
		return Status{}, err
	}
	if err := ValidateName("publication", publication); err != nil {
		return Status{}, err
	}
	ss, err := s.session(ctx)
	if err != nil {
		return Status{}, err
	}
	if err := ss.checkWalLevel(); err != nil {
		return Status{}, err
	}
	if err := ss.checkReplication(slot, "stream from a replication slot"); err != nil {
		return Status{}, err
	}
	st, ex, err := s.status(ctx, slot, publication)
	if err != nil {
		return st, err
	}
	return st, checkRunStatus(st, ex, publication)
}

// checkRunStatus judges a slot status read by status for CheckRun.
func checkRunStatus(st Status, ex statusExtra, publication string) error {
	if err := checkSlotKind(st.Slot, ex.SlotType, st.Plugin, st.Database, ex.CurrentDB); err != nil {
		return err
	}
	if st.WALStatus == "lost" {
		what, prevent := LostCause(st.InvalidationReason, ex.KeepSize)
		return fmt.Errorf("slot %q: %w: PostgreSQL invalidated it because %s, so it can never stream again; "+
			"drop and re-create it (cdc-relay slot drop --slot %s, then cdc-relay slot create --slot %s --publication %s), "+
			"and accept that the events written while it was lost are not in the stream: "+
			"recover them from the outbox table (e.g. with cdc-relay poll); so that it does not happen again, %s",
			st.Slot, ErrSlotLost, what, st.Slot, st.Slot, publication, prevent)
	}
	if !ex.PubFound {
		return fmt.Errorf("publication %q: %w: create it with `cdc-relay slot create --slot %s --publication %s`",
			publication, ErrPublicationMissing, st.Slot, publication)
	}
	if !ex.PubPublishes {
		return fmt.Errorf("publication %q: %w: it publishes %q; run: ALTER PUBLICATION %s SET (publish = 'insert')",
			publication, ErrPublicationNoInsert, st.Publication.Publish, publication)
	}
	// Only partitioned tables named in the publication are judged: a FOR ALL TABLES (or FOR
	// TABLES IN SCHEMA) publication covers partitioned tables that are none of the relay's
	// business (docs/operations.md says to set the option on it, or to name the outbox table).
	if len(ex.PubPartitioned) > 0 && !ex.PubViaRoot {
		return fmt.Errorf("publication %q: %w: it holds the partitioned table %s but publishes its rows under each "+
			"partition's name, so every record's outbox-table would name a partition and consumers would see one table "+
			"per partition; as the publication's owner run: %s (or `cdc-relay slot create --slot %s --publication %s --table %s`, which does)",
			publication, ErrPublicationNotViaRoot, strings.Join(ex.PubPartitioned, ", "), viaRootDDL(publication),
			st.Slot, publication, ex.PubPartitioned[0])
	}
	if st.Publication == nil || len(st.Publication.Tables) == 0 {
		return fmt.Errorf("publication %q: %w: add the outbox table with "+
			"`cdc-relay slot create --slot %s --publication %s --table public.outbox`",
			publication, ErrPublicationEmpty, st.Slot, publication)
	}
	return nil
}
