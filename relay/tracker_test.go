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
	var c confirms
	tr := newTracker(c.add)
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
	if c.last() != 0 {
		t.Fatalf("confirmed %s while transaction a is unacknowledged", c.last())
	}
	tr.done(a)
	if c.last() != 0 {
		t.Fatalf("confirmed %s with one record of a pending", c.last())
	}
	tr.done(a)
	if c.last() != 300 {
		t.Fatalf("confirmed %s, want 0/12C (all three)", c.last())
	}
}

func TestTrackerWaitsForCommit(t *testing.T) {
	var c confirms
	tr := newTracker(c.add)
	x := tr.begin()
	tr.add(x)
	tr.done(x)
	if c.last() != 0 {
		t.Fatal("confirmed a transaction whose Commit has not been seen")
	}
	tr.commit(x, 50)
	if c.last() != 50 {
		t.Fatalf("got %s", c.last())
	}
}

// A transaction without outbox rows (none produced) is confirmed at its commit.
func TestTrackerEmptyTransaction(t *testing.T) {
	var c confirms
	tr := newTracker(c.add)
	tr.commit(tr.begin(), 10)
	if c.last() != 10 {
		t.Fatalf("got %s", c.last())
	}
}

func TestTrackerIdleConfirmsOnlyWhenNothingInFlight(t *testing.T) {
	var c confirms
	tr := newTracker(c.add)
	x := tr.begin()
	tr.add(x)
	tr.idle(500)
	if c.last() != 0 {
		t.Fatal("idle confirmed past an open transaction")
	}
	tr.commit(x, 100)
	tr.idle(500)
	if c.last() != 0 {
		t.Fatal("idle confirmed past an unacknowledged transaction")
	}
	tr.done(x)
	tr.idle(500)
	if c.last() != 500 {
		t.Fatalf("got %s, want the keepalive's WAL end", c.last())
	}
}

// After a reconnect the open transaction is forgotten (the server sends it again); its late
// acknowledgements must not confirm anything, and committed ones before it still do.
func TestTrackerDropOpenAfterReconnect(t *testing.T) {
	var c confirms
	tr := newTracker(c.add)
	done := tr.begin()
	tr.add(done)
	tr.commit(done, 100)
	open := tr.begin()
	tr.add(open)
	tr.dropOpen()
	tr.done(open) // a late acknowledgement of the dropped transaction's record
	if c.last() != 0 {
		t.Fatalf("confirmed %s before transaction 1 was acknowledged", c.last())
	}
	tr.done(done)
	if c.last() != 100 {
		t.Fatalf("got %s", c.last())
	}
	if tr.inFlight() != 0 {
		t.Fatalf("%d transactions in flight", tr.inFlight())
	}
	replay := tr.begin()
	tr.add(replay)
	tr.commit(replay, 200)
	tr.done(replay)
	if c.last() != 200 {
		t.Fatalf("got %s", c.last())
	}
}

func TestTrackerFailStopsConfirmation(t *testing.T) {
	var c confirms
	tr := newTracker(c.add)
	x := tr.begin()
	tr.add(x)
	tr.commit(x, 100)
	tr.fail(errors.New("not delivered"))
	tr.done(x)
	tr.idle(900)
	if c.last() != 0 {
		t.Fatalf("confirmed %s after a failure", c.last())
	}
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
	var c confirms
	tr := newTracker(c.add)
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
		x := tr.begin()
		tr.add(x)
		tr.commit(x, pglogrepl.LSN(i*10))
		recs = append(recs, rec{x, pglogrepl.LSN(i * 10)})
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
	var c confirms
	tr := newTracker(c.add)
	var hooked []pglogrepl.LSN
	tr.beforeConfirm = func(l pglogrepl.LSN) { hooked = append(hooked, l) }
	tr.commit(tr.begin(), 10) // no records
	tr.idle(20)               // a keepalive
	x := tr.begin()
	tr.add(x)
	tr.commit(x, 30)
	tr.done(x)
	if len(hooked) != 1 || hooked[0] != 30 {
		t.Fatalf("hook saw %v, want only 0/1E", hooked)
	}
	if c.last() != 30 || len(c.got) != 3 {
		t.Fatalf("confirmed %v", c.got)
	}
}
