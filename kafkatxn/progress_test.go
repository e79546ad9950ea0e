package kafkatxn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pglogrepl"
)

// pgTxn is a PostgreSQL transaction of the model: where its commit record starts and ends,
// and how many records it has.
type pgTxn struct {
	final, end pglogrepl.LSN
	records    int
}

// replayModel is a relay in exactly-once mode over a fixed WAL: Kafka transactions committed
// at random points (inside PostgreSQL transactions too), the slot confirmed at random, behind
// the checkpoint, to a committed checkpoint's position only, Kafka transactions aborted
// (Rollback, replay from the slot) and the relay killed (a new Progress from the checkpoint,
// replay from the slot) at random.
type replayModel struct {
	rnd       *rand.Rand
	wal       []pgTxn
	slot      pglogrepl.LSN // confirmed_flush_lsn
	cp        Checkpoint    // the newest committed checkpoint
	committed []string      // the records read_committed consumers see, "txn/record"
	open      []string      // the open Kafka transaction's records
	killed    bool          // the last run ended in a kill: the next one is a new process
}

// run streams the WAL from the slot until the end (true) or a kill (false).
func (m *replayModel) run(t *testing.T, p *Progress) bool {
	for i, tx := range m.wal {
		if tx.final < m.slot {
			continue // the server does not send it again
		}
		whole := p.Begin(tx.final)
		for j := range tx.records {
			if skip := p.Record(); !skip {
				m.open = append(m.open, fmt.Sprintf("%d/%d", i, j))
			} else if !whole && j >= int(m.cp.Split.Records) {
				t.Fatalf("record %d/%d skipped, the checkpoint %+v covers only its first %d", i, j, m.cp, m.cp.Split.Records)
			}
			if !m.step(t, p) {
				return false
			}
		}
		p.Commit(tx.end)
		if !m.step(t, p) {
			return false
		}
	}
	m.commit(t, p)
	return true
}

// step may commit the Kafka transaction, confirm the slot, abort, or kill; false: killed or
// aborted, the run ends and starts again from the slot.
func (m *replayModel) step(t *testing.T, p *Progress) bool {
	switch r := m.rnd.IntN(100); {
	case r < 25:
		m.commit(t, p)
		if m.rnd.IntN(2) == 0 {
			m.slot = m.cp.Position // the confirm after the Kafka commit
		}
	case r < 27:
		m.open = nil // aborted: nothing of it is visible
		p.Rollback()
		return false
	case r < 29:
		m.open = nil // killed: the open transaction is aborted by the next holder
		m.killed = true
		return false
	}
	return true
}

func (m *replayModel) commit(t *testing.T, p *Progress) {
	cp := p.Checkpoint()
	if err := cp.Validate(); err != nil {
		t.Fatalf("the checkpoint to commit does not validate: %v", err)
	}
	m.committed = append(m.committed, m.open...)
	m.open = nil
	m.cp = cp
	p.Committed(cp)
}

// Whatever the kills, aborts and confirms, read_committed consumers see every record once, in
// order: a replay skips exactly what the checkpoint covers, whole transactions and the first
// records of a split one.
func TestProgressReplaysSkipExactlyWhatWasCommitted(t *testing.T) {
	for seed := range uint64(3000) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		var wal []pgTxn
		var want []string
		for i := range 1 + rnd.IntN(12) {
			n := rnd.IntN(6)
			if rnd.IntN(5) == 0 {
				n = 20 + rnd.IntN(20) // large: split across Kafka transactions
			}
			// Commit records are consecutive at times: the next one starts where this ends.
			final := pglogrepl.LSN(0x1000 + 0x100*i)
			wal = append(wal, pgTxn{final: final, end: final + 0x100 - pglogrepl.LSN(rnd.IntN(2)*0x80), records: n})
			for j := range n {
				want = append(want, fmt.Sprintf("%d/%d", i, j))
			}
		}
		m := &replayModel{rnd: rnd, wal: wal, cp: Checkpoint{Slot: "s"}}
		p := NewProgress(m.cp)
		for runs := 0; ; runs++ {
			if runs > 10_000 {
				t.Fatalf("seed %d: no end", seed)
			}
			if m.run(t, p) {
				break
			}
			if m.killed {
				m.killed = false
				p = NewProgress(m.cp) // the restart reads the checkpoint
			}
		}
		if fmt.Sprint(m.committed) != fmt.Sprint(want) {
			t.Fatalf("seed %d: read_committed consumers see\n%v\nwant\n%v", seed, m.committed, want)
		}
	}
}

// A replayed split transaction that produced nothing new yet keeps its committed part in the
// next checkpoint (a commit then must not forget it and publish it again after a crash).
func TestProgressKeepsTheCommittedSplitWhileReplayingIt(t *testing.T) {
	cp := Checkpoint{Slot: "s", Position: 0x1000, Split: Split{LSN: 0x2000, Records: 3}}
	p := NewProgress(cp)
	if p.Begin(0x2000) {
		t.Fatal("the split transaction is skipped whole")
	}
	for i := range 3 {
		if !p.Record() {
			t.Fatalf("record %d of the split transaction is produced again", i)
		}
		if got := p.Checkpoint(); got != cp {
			t.Fatalf("after skipping record %d the checkpoint is %+v, want %+v", i, got, cp)
		}
	}
	if p.Record() {
		t.Fatal("record 4, which no Kafka transaction has, is skipped")
	}
	if got, want := p.Checkpoint(), (Checkpoint{Slot: "s", Position: 0x1000, Split: Split{LSN: 0x2000, Records: 4}}); got != want {
		t.Fatalf("checkpoint %+v, want %+v", got, want)
	}
	p.Commit(0x2100)
	if got, want := p.Checkpoint(), (Checkpoint{Slot: "s", Position: 0x2100}); got != want {
		t.Fatalf("after the commit record: %+v, want %+v", got, want)
	}
}
