package kafkatxn

import "github.com/jackc/pglogrepl"

// Progress follows the PostgreSQL transactions that Kafka transactions carry, as the relay's
// pipeline decodes them, and says two things: which records a replay must skip because a
// committed Kafka transaction has them already (Begin, Record: DESIGN.md "On start, skip"),
// and the checkpoint the open Kafka transaction must commit with (Checkpoint: E6).
//
// The pipeline calls Begin, Record for each record in the decoder's order (whether it is
// produced, dead-lettered or skipped), and Commit, as the WAL gives them; after each Kafka
// commit that returned nil, Committed with the checkpoint it wrote; after an abort or a lost
// session (the replay starts at a Begin again), Rollback. It is owned by the pipeline's
// goroutine.
type Progress struct {
	committed Checkpoint // what the newest committed Kafka transaction wrote
	carried   Checkpoint // what the open Kafka transaction would write now

	open      bool          // inside a PostgreSQL transaction
	final     pglogrepl.LSN // its Begin.FinalLSN
	seen      int64         // its records so far, skipped ones included
	skipWhole bool          // all of it is in committed Kafka transactions
	skipFirst int64         // its first records that are
}

// NewProgress starts from the checkpoint ReadCheckpoint returned (the zero Checkpoint with
// the slot's name when there was none).
func NewProgress(from Checkpoint) *Progress {
	return &Progress{committed: from, carried: from}
}

// Begin starts a PostgreSQL transaction, named by the start of its commit record
// (Begin.FinalLSN). It reports whether a committed Kafka transaction carries all of it: then
// every one of its records is skipped.
func (p *Progress) Begin(finalLSN pglogrepl.LSN) (skipWhole bool) {
	p.open, p.final, p.seen = true, finalLSN, 0
	p.skipWhole, p.skipFirst = p.committed.Skip(finalLSN)
	return p.skipWhole
}

// Record counts the open transaction's next record and reports whether it is to be skipped
// (a committed Kafka transaction has it). A record not skipped is in the open Kafka
// transaction once it is produced.
func (p *Progress) Record() (skip bool) {
	p.seen++
	if p.skipWhole || p.seen <= p.skipFirst {
		return true
	}
	p.carried.Split = Split{LSN: p.final, Records: p.seen}
	return false
}

// Commit ends the open PostgreSQL transaction at the end of its commit record
// (Commit.TransactionEndLSN): the open Kafka transaction, once committed, covers it whole.
func (p *Progress) Commit(endLSN pglogrepl.LSN) {
	p.open = false
	if endLSN > p.carried.Position {
		p.carried.Position = endLSN
	}
	if p.carried.Split.LSN == p.final {
		p.carried.Split = Split{} // this one is carried whole now
	}
	// Otherwise the split is a later transaction's, committed before a crash and not replayed
	// yet (this one was skipped whole): a checkpoint that forgot it would publish its
	// committed part again.
}

// Checkpoint is what the open Kafka transaction commits with: the position after the last
// whole PostgreSQL transaction, and the part of the open one that it and earlier Kafka
// transactions carry.
func (p *Progress) Checkpoint() Checkpoint { return p.carried }

// Committed records that the open Kafka transaction committed with cp (from Checkpoint).
func (p *Progress) Committed(cp Checkpoint) {
	p.committed, p.carried = cp, cp
}

// Rollback forgets what the open Kafka transaction carried (it was aborted, or the session was
// lost and the replay begins at a Begin again): back to the last committed checkpoint.
func (p *Progress) Rollback() {
	p.carried = p.committed
	p.open, p.seen, p.skipWhole, p.skipFirst = false, 0, false, 0
}
