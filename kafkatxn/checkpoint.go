package kafkatxn

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// checkpointVersion is the encoding's version, written in every value. A reader refuses a
// higher one (a newer relay wrote it) instead of guessing at its fields.
const checkpointVersion = 1

// Checkpoint is where the relay stands once a Kafka transaction committed: it is written in
// that transaction, so a read_committed reader sees it exactly when it sees the records.
//
// The covered records are those of every PostgreSQL transaction whose commit record starts
// before Position, plus, when Split.Records > 0, the first Split.Records records of the one
// transaction whose commit record starts at Split.LSN (a PostgreSQL transaction larger than a
// Kafka transaction, carried by several). A replay from the slot skips exactly those (Skip).
type Checkpoint struct {
	// Slot names the replication slot; it is the record's key.
	Slot string
	// Position is the end of the commit record (Commit.TransactionEndLSN) of the newest
	// PostgreSQL transaction that committed Kafka transactions carry whole, with every earlier
	// one: the position the relay may confirm to PostgreSQL (DESIGN.md rules 1 and 2).
	Position pglogrepl.LSN
	// Split is the PostgreSQL transaction after Position that committed Kafka transactions
	// carry only in part; zero when none is.
	Split Split
	// SystemID and Timeline are the PostgreSQL server's IDENTIFY_SYSTEM answer when the
	// checkpoint was written: LSNs mean something only on the cluster (and, after a promotion
	// without synchronized_standby_slots, the timeline) that wrote them. Informational for the
	// reader; the relay decides what a mismatch means (DESIGN.md "Exactly-once").
	SystemID string
	Timeline int32
}

// Split is a PostgreSQL transaction carried by more than one Kafka transaction.
type Split struct {
	// LSN is the start of the transaction's commit record (Begin.FinalLSN, the cdc-lsn header):
	// the transaction's identity on the replay, known at its Begin.
	LSN pglogrepl.LSN
	// Records is how many of the transaction's records, in the order the decoder emits them
	// (dead letters included: a record that became a letter counts once), committed Kafka
	// transactions carry.
	Records int64
}

// Skip says what a replayed PostgreSQL transaction, named by the start of its commit record
// (Begin.FinalLSN), already has in Kafka: all of it (whole), or its first records.
func (c Checkpoint) Skip(finalLSN pglogrepl.LSN) (whole bool, records int64) {
	if finalLSN < c.Position {
		return true, 0
	}
	if c.Split.Records > 0 && finalLSN == c.Split.LSN {
		return false, c.Split.Records
	}
	return false, 0
}

// Validate reports a checkpoint that would make a replay skip the wrong records.
func (c Checkpoint) Validate() error {
	if c.Slot == "" {
		return ErrNoSlot
	}
	if c.Split.Records < 0 {
		return fmt.Errorf("txn: checkpoint of slot %s: split record count %d is negative", c.Slot, c.Split.Records)
	}
	if c.Split.Records > 0 && c.Split.LSN < c.Position {
		// A transaction whose commit starts before Position is covered whole already.
		return fmt.Errorf("txn: checkpoint of slot %s: split transaction at %s is before the position %s it would follow", c.Slot, c.Split.LSN, c.Position)
	}
	return nil
}

// wireCheckpoint is the value's JSON: LSNs in PostgreSQL's X/Y text, as in cdc-lsn and
// `slot status`, so that an operator reading the topic with any tool can compare them.
type wireCheckpoint struct {
	Version      int    `json:"version"`
	Slot         string `json:"slot"`
	Position     string `json:"position"`
	SplitLSN     string `json:"split_lsn,omitempty"`
	SplitRecords int64  `json:"split_records,omitempty"`
	SystemID     string `json:"system_id,omitempty"`
	Timeline     int32  `json:"timeline,omitempty"`
}

// MarshalBinary encodes the checkpoint as the record value.
func (c Checkpoint) MarshalBinary() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w := wireCheckpoint{Version: checkpointVersion, Slot: c.Slot, Position: c.Position.String(), SystemID: c.SystemID, Timeline: c.Timeline}
	if c.Split.Records > 0 {
		w.SplitLSN, w.SplitRecords = c.Split.LSN.String(), c.Split.Records
	}
	return json.Marshal(w)
}

// UnmarshalBinary decodes a record value written by MarshalBinary.
func (c *Checkpoint) UnmarshalBinary(b []byte) error {
	var w wireCheckpoint
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("txn: decode checkpoint: %w", err)
	}
	if w.Version < 1 || w.Version > checkpointVersion {
		return fmt.Errorf("txn: checkpoint of slot %q has version %d, this relay reads version %d: a newer relay wrote it; run that version", w.Slot, w.Version, checkpointVersion)
	}
	pos, err := pglogrepl.ParseLSN(w.Position)
	if err != nil {
		return fmt.Errorf("txn: checkpoint of slot %q: position: %w", w.Slot, err)
	}
	out := Checkpoint{Slot: w.Slot, Position: pos, SystemID: w.SystemID, Timeline: w.Timeline}
	if w.SplitRecords != 0 {
		if out.Split.LSN, err = pglogrepl.ParseLSN(w.SplitLSN); err != nil {
			return fmt.Errorf("txn: checkpoint of slot %q: split_lsn: %w", w.Slot, err)
		}
		out.Split.Records = w.SplitRecords
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*c = out
	return nil
}
