package relay

import (
	"math"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/testkit/simwal"
)

// Invariant (a)'s bound is the commit of the first transaction with a record parked nowhere,
// however many flushes asked before: the transactions it skips as parked must be exactly those
// it found parked, and one committed later, or delivered later, counts from then on.
func TestSimSafeBoundIsTheFirstUnparkedTransaction(t *testing.T) {
	h := &harness{store: &tableStore{}, idx: &kafkaIndex{mu: make(chanMutex, 1), byID: map[string][]int{}}}
	txn := func(commit pglogrepl.LSN, ids ...int64) committedTxn {
		c := committedTxn{txn: simwal.Txn{CommitLSN: commit}}
		for _, id := range ids {
			c.rows = append(c.rows, simRow{id: id, key: "k", topic: "sim.t0"})
		}
		return c
	}
	deliver := func(id string) {
		h.idx.byID[id] = append(h.idx.byID[id], len(h.idx.recs))
		h.idx.recs = append(h.idx.recs, seenRec{topic: "sim.t0", id: id})
	}
	bound := func(committed []committedTxn, want pglogrepl.LSN) {
		t.Helper()
		if got, why := h.safeBound(committed); got != want {
			t.Fatalf("bound %s (%s), want %s", got, why, want)
		}
	}
	committed := []committedTxn{txn(0x100, 1, 2), txn(0x200, 3), txn(0x300, 4)}
	bound(committed, 0x100)
	deliver("public.outbox/1")
	bound(committed, 0x100) // id 2 is still nowhere
	deliver("public.outbox/2")
	deliver("public.outbox/4")
	bound(committed, 0x200)
	bound(committed[:1], math.MaxUint64) // an older snapshot of what was committed
	deliver("public.outbox/3")
	bound(committed, math.MaxUint64)
	committed = append(committed, txn(0x400, 5))
	bound(committed, 0x400)
	bound(committed[:2], math.MaxUint64)
}
