package relay

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cdc-relay/cdc-relay/replication"
)

// lostSession is how the relay lets go of a slot it lost: another relay may take the slot and
// replay from its position before this one reconnects, and records this one still buffered
// would then land after the new holder's records of the same keys. So, as soon as the stream
// reports the session lost, the relay forgets every transaction, aborts what the producer
// buffers (sending nothing of it again) and discards what the pipeline still has of the old
// session until the next session's reset, which waits for the abort to end (awaitAbort). The
// abort begins only once no Produce call of the old session is in progress (produce). A dead
// letter is the exception: it is owed, and parked once the abort ended (abortRunning).
// (DESIGN.md, "A lost session aborts what the producer buffers")
type lostSession struct {
	discard atomic.Bool // the old session's messages are dropped until the next KindReset

	// produce is held (read) by the pipeline from its discard check to the end of its Produce
	// call, so that once sessionLost holds it, no record of the old session can be buffered
	// after the abort began. cancel ends the context of that Produce call, so that one waiting
	// for buffer space (Kafka down) returns at once, its record not buffered.
	produce sync.RWMutex

	// losses counts the sessions lost (sessionLost, under mu): each sends a mark down the channel
	// after the lost session's messages, and a KindReset ahead of a mark the pipeline has not
	// passed yet starts a session that was lost too (awaitAbort).
	losses atomic.Int64

	// producing is set while the pipeline is in a Produce call: a stop cancels its context only
	// then (stopProducing).
	producing atomic.Bool

	mu     sync.Mutex
	failed bool          // a record failed for good (stopProduce): the Produce context stays ended
	done   chan struct{} // closed when the abort finished; nil if none ran
	pctx   context.Context
	cancel context.CancelFunc
}

// produceContext returns the context for the pipeline's Produce calls of this session. It does
// not end with ctx: franz-go fails a buffered record whose Produce context ended (in flight too,
// with AllowIdempotentProduceCancellation), and a clean stop flushes what is buffered instead
// (DESIGN.md, "Records carry"). It ends when the session is lost, or when ctx ends while a
// Produce call is in progress (stopProducing): one waiting for buffer space must return.
func (l *lostSession) produceContext(ctx context.Context) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pctx == nil || l.pctx.Err() != nil && !l.failed {
		l.pctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	if l.failed && l.pctx.Err() == nil {
		l.cancel() // a record failed for good before the first Produce: none is made
	}
	return l.pctx
}

// stopProduce ends the session's Produce context when a record failed for good (the relay
// stops, tracker.fail): franz-go fails the failed record's partition buffer with it, and the
// space that frees wakes a Produce call waiting for it, whose record it sends at once, ahead of
// the failed records' replay (a gap the replay fills out of order). Ended from the failed record's promise, which franz-go calls before it frees the
// space, the context makes franz-go fail that record before sending it. DESIGN.md, "Retries are
// unlimited".
func (l *lostSession) stopProduce() {
	l.mu.Lock()
	l.failed = true // for good: produceContext makes no other
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
}

// withSession returns a context that ends with ctx and with the session's Produce context, for
// a dead letter (produceDeadLetters gives it one that does not end with Run's): a lost session's
// cancel ends its request in flight too (the letter is queued again and parked after the abort),
// so the abort waits for nothing. release ends it; the letter's promise calls it.
func (l *lostSession) withSession(ctx context.Context) (_ context.Context, release func()) {
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.produceContext(ctx), cancel)
	return c, func() { stop(); cancel() }
}

// stopProducing runs once Run's context ended: a Produce call in progress (waiting for buffer
// space, Kafka slow or down) returns, its record not buffered; the records of the session
// buffered before fail with it, as franz-go fails a partition's batches together, and replay.
// Without a call in progress nothing is canceled: the pipeline checks the context after setting
// producing, before it calls Produce, so a call that begins later is never made.
func (l *lostSession) stopProducing() {
	if !l.producing.Load() {
		return
	}
	l.mu.Lock()
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
}

// sessionLost is the stream's OnSessionLost.
func (r *Relay) sessionLost(cause error) { r.delivery.sessionLost(cause) }

// abandonSession is sessionLost in at-least-once mode (lostSession). The tracker confirms
// nothing of the forgotten transactions: the next session, this relay's or another's, replays
// them from the slot. The abort fails what the producer buffers with kgo.ErrAborting (a request
// already sent may still land), and sends nothing of the old session again: the producer may
// fail a record whose outcome it does not know (kgo.AllowIdempotentProduceCancellation, set in
// New), and the cancel of the session's Produce context ends the wait for the requests in
// flight (the pipeline's and the letters', withSession), so the abort ends at once.
func (r *Relay) abandonSession(cause error) {
	r.lost.mu.Lock()
	r.lost.discard.Store(true)
	r.lost.losses.Add(1)
	if r.lost.cancel != nil {
		r.lost.cancel() // a Produce waiting for buffer space returns, its record not buffered
	}
	r.lost.mu.Unlock()
	// Wait for a Produce call in progress: its record is buffered (or not) before the abort
	// begins, so that no record of the old session is delivered after an earlier one was aborted.
	r.lost.produce.Lock()
	r.lost.produce.Unlock() //nolint:staticcheck,gocritic // an empty critical section: a barrier
	r.track.reset()
	done := make(chan struct{})
	r.lost.mu.Lock()
	prev := r.lost.done
	r.lost.done = done
	r.lost.mu.Unlock()
	buffered := r.sink.Buffered()
	if buffered > 0 {
		r.log.Warn("the replication session ended: aborting the records still buffered for Kafka, so that none lands after "+
			"those of whoever holds the slot next; the next session replays them from the slot",
			"buffered", buffered, "cause", cause)
	}
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		began := time.Now()
		// Not franz-go's UnsafeAbortBufferedRecords: it can leave a partition in
		// a state franz-go does not drain again, and a dead letter produced to it after the abort
		// was never sent (TestLostSessionParksItsWaitingDeadLetters, 1 run in 8). The session's
		// cancel above ends the requests in flight, and New lets the producer fail records whose
		// outcome it does not know, so this abort ends at once and sends nothing again.
		if err := r.sink.Abort(context.Background()); err != nil {
			r.log.Warn("aborting the buffered records failed", "cause", err)
		} else if buffered > 0 {
			r.log.Info("aborted the records buffered for Kafka when the session ended", "took", time.Since(began).Round(time.Millisecond))
		}
	}()
	// The mark of the loss, behind everything the lost session sent and ahead of the next
	// session's KindReset: this goroutine is the only one that sends.
	select {
	case r.msgs <- []replication.Message{{Kind: replication.KindReset, Data: lossMark}}:
	case <-r.stopped:
	}
}

// lossMark is the Data of the KindReset that sessionLost sends down the channel: a reset the
// stream sends has none.
var lossMark = []byte("session lost")

// isLossMark reports whether m is sessionLost's mark.
func isLossMark(m *replication.Message) bool {
	return m.Kind == replication.KindReset && m.Data != nil
}

// abortRunning returns a channel closed once no abort of a lost session's records runs. The
// dead-letter goroutine produces nothing before (franz-go fails a record produced during an
// abort at once), and then parks the old session's letters too, queued, in flight, aborted or
// still to come from a refused record's promise: a letter stands for its record in its key's
// order, and the relay went on past it, so forgotten, its record would replay after later
// records of its key with nothing in the dead-letter topic to say why. Their transactions stay
// forgotten: parking them confirms nothing, and a replay may letter them again (duplicates,
// never a gap).
func (r *Relay) abortRunning() <-chan struct{} {
	r.lost.mu.Lock()
	defer r.lost.mu.Unlock()
	if r.lost.done == nil {
		return closedChan
	}
	return r.lost.done
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// awaitAbort waits, at the KindReset that starts a new session, until the abort of the lost
// session's records finished. It returns false if ctx ended first.
//
// It resumes (the pipeline takes the session's messages, the tracker confirms) only if no
// session was lost since this reset was sent: seen is the losses whose marks the pipeline
// passed. A reset taken late, or one that waited for an abort while the session it starts was
// lost too, starts a lost session: its messages stay discarded until the reset after the next
// mark (three sessions lost in a row: the second's messages were produced after its loss).
func (r *Relay) awaitAbort(ctx context.Context, seen int64) bool {
	for {
		r.lost.mu.Lock()
		done := r.lost.done
		if r.lost.losses.Load() != seen {
			r.lost.mu.Unlock()
			return true
		}
		if done == nil || isClosed(done) {
			r.lost.discard.Store(false)
			r.track.resume()
			r.lost.mu.Unlock()
			return true
		}
		r.lost.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return false
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
