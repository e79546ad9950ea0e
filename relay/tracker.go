package relay

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
)

// txn is one transaction's delivery state. Its fields are guarded by tracker.mu.
type txn struct {
	pending   int           // records produced and not yet acknowledged
	records   bool          // at least one record was produced
	committed bool          // the Commit message has been seen
	end       pglogrepl.LSN // the commit's end LSN, the position to confirm
	commitAt  time.Time     // the commit time from Begin, for the oldest-unacknowledged age
}

// tracker keeps transactions in commit order and confirms the end LSN of the newest one
// whose records, and all earlier transactions' records, are acknowledged. Acknowledgements
// arrive out of order from franz-go's callbacks; the confirmed position is the highest
// contiguous one. It is safe for concurrent use.
type tracker struct {
	mu     sync.Mutex
	q      []*txn // oldest first
	head   int    // q[head:] are live
	failed error  // once set, nothing is confirmed any more
	failCh chan struct{}
	broken atomic.Bool // failed != nil, read without the lock by the pipeline after each message

	// confirm receives each new position. beforeConfirm, when set, runs first (a test hook
	// that kills the process between Kafka's acknowledgement and the status update).
	confirm       func(pglogrepl.LSN)
	beforeConfirm func(pglogrepl.LSN)

	// room is signalled when transactions leave the queue while the pipeline waits for room
	// (waitRoom): the queue is bounded, so that a record held for good (a dead letter nobody
	// takes, a partition whose leader is gone) pauses reading instead of growing the queue.
	room     chan struct{}
	wantRoom bool
	// lost: the session ended and every transaction was forgotten (reset); until the next
	// session (resume), nothing is confirmed, not even an idle keepalive's WAL end.
	lost bool

	// unresolved counts the records added and not yet done, over every transaction; settled is
	// signalled when it comes down to 0. Exactly-once mode commits a Kafka transaction only
	// then (exactly.go): Kafka commits whatever the transaction holds. At-least-once mode does
	// not read it (a lost session's aborted records are never done there).
	unresolved int
	settled    chan struct{}
}

func newTracker(confirm func(pglogrepl.LSN)) *tracker {
	return &tracker{confirm: confirm, failCh: make(chan struct{}), room: make(chan struct{}, 1), settled: make(chan struct{}, 1)}
}

// hasRoom reports whether fewer than limit transactions are tracked; if not, the next
// confirmation signals room.
func (t *tracker) hasRoom(limit int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok := len(t.q)-t.head < limit
	t.wantRoom = !ok
	return ok
}

// begin opens a transaction at the tail.
func (t *tracker) begin() *txn { return t.beginAt(time.Time{}) }

// beginAt opens a transaction committed at commitAt (from its Begin message) at the tail.
func (t *tracker) beginAt(commitAt time.Time) *txn {
	x := &txn{commitAt: commitAt}
	t.mu.Lock()
	if t.head > 1024 && t.head > len(t.q)/2 {
		n := copy(t.q, t.q[t.head:])
		clear(t.q[n:])
		t.q, t.head = t.q[:n], 0
	}
	t.q = append(t.q, x)
	t.mu.Unlock()
	return x
}

// add counts one more record of x in flight.
func (t *tracker) add(x *txn) {
	t.mu.Lock()
	x.pending++
	x.records = true
	t.unresolved++
	t.mu.Unlock()
}

// done counts one record of x acknowledged.
func (t *tracker) done(x *txn) {
	t.mu.Lock()
	x.pending--
	if t.unresolved--; t.unresolved == 0 {
		select {
		case t.settled <- struct{}{}:
		default:
		}
	}
	t.advance()
	t.mu.Unlock()
}

// settledNow reports whether every record added is done and the tracker has not failed.
func (t *tracker) settledNow() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unresolved == 0 && t.failed == nil
}

// awaitSettled returns once every record added is done (acknowledged, or parked as a dead
// letter), ctx's error if it ends first, and the tracker's failure if one comes first.
func (t *tracker) awaitSettled(ctx context.Context) error {
	for {
		t.mu.Lock()
		n, failed := t.unresolved, t.failed
		t.mu.Unlock()
		switch {
		case failed != nil:
			return failed
		case n == 0:
			return nil
		}
		select {
		case <-t.settled:
		case <-t.failCh:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// commit marks x complete once its records are acknowledged.
func (t *tracker) commit(x *txn, end pglogrepl.LSN) {
	t.mu.Lock()
	x.committed, x.end = true, end
	t.advance()
	t.mu.Unlock()
}

// dropOpen forgets an uncommitted transaction at the tail: the connection was lost inside it
// and the server will send it again from its Begin. Its records already produced become
// duplicates; their acknowledgements still arrive and count on the detached txn.
func (t *tracker) dropOpen() {
	t.mu.Lock()
	if n := len(t.q); n > t.head && !t.q[n-1].committed {
		t.q[n-1] = nil
		t.q = t.q[:n-1]
	}
	t.advance()
	t.mu.Unlock()
}

// reset forgets every transaction: the replication session ended, another process may hold
// the slot, and the next session replays everything after the slot's position. Records of the
// forgotten transactions that are still acknowledged count on detached txns and confirm nothing.
func (t *tracker) reset() {
	t.mu.Lock()
	t.lost = true
	clear(t.q)
	t.q, t.head = t.q[:0], 0
	if t.wantRoom {
		t.wantRoom = false
		select {
		case t.room <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
}

// resume starts confirming again, for the next session.
func (t *tracker) resume() {
	t.mu.Lock()
	t.lost = false
	t.mu.Unlock()
}

// idle confirms walEnd if nothing is in flight: every transaction the server sent before
// this keepalive is delivered, so everything up to its WAL end is safe to release.
func (t *tracker) idle(walEnd pglogrepl.LSN) {
	t.mu.Lock()
	if len(t.q) == t.head && t.failed == nil && !t.lost && walEnd != 0 {
		// No beforeConfirm: the hook is for positions Kafka's acknowledgements earned (see advance).
		t.confirm(walEnd)
	}
	t.mu.Unlock()
}

// inFlight returns the number of open transactions.
func (t *tracker) inFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.q) - t.head
}

// fail stops all further confirmation: a record could be neither delivered nor parked.
func (t *tracker) fail(err error) {
	t.mu.Lock()
	if t.failed == nil {
		t.failed = err
		t.broken.Store(true)
		close(t.failCh)
	}
	t.mu.Unlock()
}

func (t *tracker) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *tracker) advance() {
	if t.failed != nil {
		return
	}
	var last pglogrepl.LSN
	earned := false // by a Kafka acknowledgement, not only by transactions without outbox events
	for t.head < len(t.q) {
		x := t.q[t.head]
		if !x.committed || x.pending > 0 {
			break
		}
		last = x.end
		earned = earned || x.records
		t.q[t.head] = nil
		t.head++
	}
	if t.head == len(t.q) {
		t.q, t.head = t.q[:0], 0
	}
	if last == 0 {
		return
	}
	if t.wantRoom {
		t.wantRoom = false
		select {
		case t.room <- struct{}{}:
		default:
		}
	}
	// The test hook stands between Kafka's acknowledgement and the confirmation, so it only
	// counts positions that records earned. Transactions without outbox events (another
	// relay's logical messages reach every slot) would otherwise fire it before anything was
	// published (TestKill9AfterKafkaAckReplaysWithoutLoss flaked on exactly that).
	if earned && t.beforeConfirm != nil {
		t.beforeConfirm(last)
	}
	t.confirm(last)
}

// pending returns the number of open transactions and the commit time of the oldest (zero
// when none).
func (t *tracker) pending() (int, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.head == len(t.q) {
		return 0, time.Time{}
	}
	return len(t.q) - t.head, t.q[t.head].commitAt
}
