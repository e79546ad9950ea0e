package oracle

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Row is one outbox row a writer wrote: its id, its key (aggregate_id) and its tag.
type Row struct {
	ID  int64
	Key string
	N   int // the payload's "n", unique per Writer
}

// rowID is what tells rows apart: the id, and the tag (the id alone may be reused after a failover).
type rowID struct {
	id int64
	n  int
}

// Ledger is what a writer committed and rolled back, in commit order. Safe for concurrent use.
type Ledger struct {
	mu     sync.Mutex
	rows   []Row           // committed, in commit order
	tags   map[int64]int   // committed id -> tag
	rolled map[int64][]int // rolled-back (or failed before COMMIT) id -> tags
	counts Counts
}

// Counts are the ledger's figures.
type Counts struct {
	Rows, Txs                 int // committed
	RolledBack, RolledBackTxs int // rolled back, or failed before COMMIT
	Ambiguous                 int // commits whose outcome was looked up (the connection died during COMMIT)
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{tags: map[int64]int{}, rolled: map[int64][]int{}}
}

// Commit records one committed transaction's rows, in their order in it.
func (l *Ledger) Commit(rows []Row) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts.Txs++
	l.counts.Rows += len(rows)
	l.rows = append(l.rows, rows...)
	for _, r := range rows {
		l.tags[r.ID] = r.N
	}
}

// Rollback records the rows of a transaction that did not commit.
func (l *Ledger) Rollback(rows []Row) {
	if len(rows) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts.RolledBackTxs++
	l.counts.RolledBack += len(rows)
	for _, r := range rows {
		l.rolled[r.ID] = append(l.rolled[r.ID], r.N)
	}
}

func (l *Ledger) ambiguous() {
	l.mu.Lock()
	l.counts.Ambiguous++
	l.mu.Unlock()
}

// Counts returns the figures so far.
func (l *Ledger) Counts() Counts {
	l.mu.Lock()
	c := l.counts
	l.mu.Unlock()
	return c
}

// Committed returns every committed id, in commit order.
func (l *Ledger) Committed() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]int64, len(l.rows))
	for i, r := range l.rows {
		ids[i] = r.ID
	}
	return ids
}

// Delivery is one record read from the topic.
type Delivery struct {
	ID        int64
	Key       string
	N         int // the payload's "n"; -1 if it has none
	Partition int32
	Offset    int64
	At        time.Time // the record's timestamp: when the relay produced it
}

// KeyOrder is a key whose first deliveries differ from its commit order.
type KeyOrder struct {
	Key       string
	Got, Want []int64 // first deliveries; commit order
}

func (k KeyOrder) String() string {
	return fmt.Sprintf("key %s: first deliveries %v, commit order %v", k.Key, head(k.Got), head(k.Want))
}

// Verdict is what Check found.
type Verdict struct {
	Records        int
	Duplicates     []Delivery // every delivery of a row after its first, in offset order
	Lost           []Row      // committed rows never delivered, in commit order
	RolledBackSeen []Delivery // deliveries of rows that never committed
	Reordered      []KeyOrder // by key
}

// OK reports whether the contract held: nothing lost, nothing rolled back delivered, no key
// out of order. Duplicates are allowed.
func (v Verdict) OK() bool {
	return len(v.Lost) == 0 && len(v.RolledBackSeen) == 0 && len(v.Reordered) == 0
}

// Check compares the deliveries (in any order: they are read in offset order per partition,
// the order a consumer sees) with what the ledger committed.
func (l *Ledger) Check(ds []Delivery) Verdict {
	ds = append([]Delivery(nil), ds...)
	sort.SliceStable(ds, func(i, j int) bool {
		if ds[i].Partition != ds[j].Partition {
			return ds[i].Partition < ds[j].Partition
		}
		return ds[i].Offset < ds[j].Offset
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	v := Verdict{Records: len(ds)}
	first := map[rowID]bool{}
	got := map[string][]int64{}
	for _, d := range ds {
		r := rowID{d.ID, d.N}
		if first[r] {
			v.Duplicates = append(v.Duplicates, d)
			continue
		}
		first[r] = true
		// A record of a row this ledger never committed (rolled back, or lost with an old
		// primary and its id reused since) is not part of any key's commit order.
		if n, ok := l.tags[d.ID]; ok && n == d.N {
			got[d.Key] = append(got[d.Key], d.ID)
			continue
		}
		for _, n := range l.rolled[d.ID] {
			if n == d.N {
				v.RolledBackSeen = append(v.RolledBackSeen, d)
				break
			}
		}
	}
	want := map[string][]int64{}
	for _, r := range l.rows {
		if !first[rowID{r.ID, r.N}] {
			v.Lost = append(v.Lost, r)
		}
		want[r.Key] = append(want[r.Key], r.ID)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !equal(got[k], want[k]) {
			v.Reordered = append(v.Reordered, KeyOrder{Key: k, Got: got[k], Want: want[k]})
		}
	}
	return v
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func head(ids []int64) []int64 {
	if len(ids) > 20 {
		return ids[:20]
	}
	return ids
}
