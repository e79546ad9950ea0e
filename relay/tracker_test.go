package relay

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/jackc/pglogrepl"
)

type confirms struct {
	mu  sync.Mutex
	got []pglogrepl.LSN
}

func (c *confirms) add(l pglogrepl.LSN) { c.mu.Lock(); c.got = append(c.got, l); c.mu.Unlock() }

// newTestTracker returns a tracker and the confirmations it made.
func newTestTracker() (*tracker, *confirms) {
	c := &confirms{}
	return newTracker(c.add), c
}

// committed begins a transaction on tr, produces one record of it and commits it at end.
func committed(tr *tracker, end pglogrepl.LSN) *txn {
	x := tr.begin()
	tr.add(x)
	tr.commit(x, end)
	return x
}

// wantLast fails t unless the last confirmation (0: none) is want; when says at what point.
func (c *confirms) wantLast(t *testing.T, want pglogrepl.LSN, when string) {
	t.Helper()
	if got := c.last(); got != want {
		t.Fatalf("%s: confirmed %s, want %s", when, got, want)
	}
}
func (c *confirms) last() pglogrepl.LSN {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) == 0 {
		return 0
	}
	return c.got[len(c.got)-1]
}

// Acknowledgements out of order: the position is the end of the contiguous acknowledged prefix,
// never a later transaction's while an earlier one waits (the bug of acking past a failed batch).
func TestTrackerConfirmsOnlyTheContiguousPrefix(t *testing.T) {
	tr, c := newTestTracker()
	a, b, d := tr.begin(), tr.begin(), tr.begin()
	tr.add(a)
	tr.add(a)
	tr.commit(a, 100)
	tr.add(b)
	tr.commit(b, 200)
	tr.add(d)
	tr.commit(d, 300)

	tr.done(d) // the newest first
	tr.done(b)
	c.wantLast(t, 0, "transaction a unacknowledged")
	tr.done(a)
	c.wantLast(t, 0, "one record of a pending")
	tr.done(a)
	c.wantLast(t, 300, "all three acknowledged")
}

func TestTrackerWaitsForCommit(t *testing.T) {
	tr, c := newTestTracker()
	x := tr.begin()
	tr.add(x)
	tr.done(x)
	c.wantLast(t, 0, "acknowledged, its Commit not seen")
	tr.commit(x, 50)
	c.wantLast(t, 50, "committed")
}

// A transaction without outbox rows (none produced) is confirmed at its commit.
func TestTrackerEmptyTransaction(t *testing.T) {
	tr, c := newTestTracker()
	tr.commit(tr.begin(), 10)
	c.wantLast(t, 10, "committed")
}

func TestTrackerIdleConfirmsOnlyWhenNothingInFlight(t *testing.T) {
	tr, c := newTestTracker()
	x := tr.begin()
	tr.add(x)
	tr.idle(500)
	c.wantLast(t, 0, "idle with an open transaction")
	tr.commit(x, 100)
	tr.idle(500)
	c.wantLast(t, 0, "idle with an unacknowledged transaction")
	tr.done(x)
	tr.idle(500)
	c.wantLast(t, 500, "idle with nothing in flight (the keepalive's WAL end)")
}

// After a reconnect the open transaction is forgotten (the server sends it again); its late
// acknowledgements must not confirm anything, and committed ones before it still do.
func TestTrackerDropOpenAfterReconnect(t *testing.T) {
	tr, c := newTestTracker()
	done := committed(tr, 100)
	open := tr.begin()
	tr.add(open)
	tr.dropOpen()
	tr.done(open) // a late acknowledgement of the dropped transaction's record
	c.wantLast(t, 0, "transaction 1 unacknowledged")
	tr.done(done)
	c.wantLast(t, 100, "transaction 1 acknowledged")
	if tr.inFlight() != 0 {
		t.Fatalf("%d transactions in flight", tr.inFlight())
	}
	tr.done(committed(tr, 200)) // the replay
	c.wantLast(t, 200, "the replay acknowledged")
}

func TestTrackerFailStopsConfirmation(t *testing.T) {
	tr, c := newTestTracker()
	x := committed(tr, 100)
	tr.fail(errors.New("not delivered"))
	tr.done(x)
	tr.idle(900)
	c.wantLast(t, 0, "after a failure")
	select {
	case <-tr.failCh:
	default:
		t.Fatal("failCh not closed")
	}
	tr.fail(errors.New("second")) // idempotent
	if tr.err().Error() != "not delivered" {
		t.Fatal(tr.err())
	}
}

// Random interleavings from many goroutines: confirmations never go backwards, never pass an
// unacknowledged transaction, and end at the last commit.
func TestTrackerConcurrentAcks(t *testing.T) {
	tr, c := newTestTracker()
	const n = 2000
	type rec struct {
		x   *txn
		end pglogrepl.LSN
	}
	var recs []rec
	acked := make([]bool, n+1)
	var mu sync.Mutex
	tr.beforeConfirm = func(l pglogrepl.LSN) {
		// Everything at or below l must be acknowledged already.
		mu.Lock()
		defer mu.Unlock()
		for i := 1; i <= int(l)/10; i++ {
			if !acked[i] {
				t.Errorf("confirmed %d with transaction %d unacknowledged", l, i)
				return
			}
		}
	}
	for i := 1; i <= n; i++ {
		recs = append(recs, rec{committed(tr, pglogrepl.LSN(i*10)), pglogrepl.LSN(i * 10)})
	}
	rand.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(recs); i += 8 {
				mu.Lock()
				acked[int(recs[i].end)/10] = true
				mu.Unlock()
				tr.done(recs[i].x)
			}
		}(w)
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 1; i < len(c.got); i++ {
		if c.got[i] <= c.got[i-1] {
			t.Fatalf("confirmation went from %s to %s", c.got[i-1], c.got[i])
		}
	}
	if c.got[len(c.got)-1] != n*10 {
		t.Fatalf("final confirmation %s, want %d", c.got[len(c.got)-1], n*10)
	}
}

// Regression: the crash hook counted confirmations of transactions without outbox events (other
// relays' logical messages reach every slot), so it killed the relay before it published anything.
func TestTrackerHookCountsOnlyPositionsRecordsEarned(t *testing.T) {
	tr, c := newTestTracker()
	var hooked []pglogrepl.LSN
	tr.beforeConfirm = func(l pglogrepl.LSN) { hooked = append(hooked, l) }
	tr.commit(tr.begin(), 10) // no records
	tr.idle(20)               // a keepalive
	tr.done(committed(tr, 30))
	if len(hooked) != 1 || hooked[0] != 30 {
		t.Fatalf("hook saw %v, want only 0/1E", hooked)
	}
	if c.last() != 30 || len(c.got) != 3 {
		t.Fatalf("confirmed %v", c.got)
	}
}
