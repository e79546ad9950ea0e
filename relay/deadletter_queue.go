package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/sink"
)

// deadLetter is a record to park and the transaction it belongs to.
type deadLetter struct {
	rec *kgo.Record
	txn *txn
	// key is the original topic and key of the record, and id its outbox id, as the pipeline knew
	// them from its event. ordered: until it is parked, the later records of its topic and key
	// wait (deadletter_order.go); not for a bad row, which never reaches its topic. Read by park
	// alone.
	key     letterKey
	id      string
	ordered bool
	seq     uint64 // the produce sequence number of the record (Relay.produced), if ordered
	// sent is the record itself when Kafka refused it after franz-go sent it: a transaction may
	// hold it already (delivery.held; exactly-once mode's open one).
	sent *kgo.Record
}

// park queues a dead letter for the dead-letter goroutine and counts it against the
// dead-letter budget until it is parked (acknowledged on the topic or committed in the table).
func (r *Relay) park(dl deadLetter) {
	r.letters.add(dl)
	r.dlq.push(dl)
}

// parked is called once a dead letter is acknowledged on the topic or committed in the table.
func (r *Relay) parked(rec *kgo.Record, x *txn) {
	// Ends the span of a letter committed to the table; one the topic acknowledged ended then.
	sink.TraceParked(rec, r.cfg.DeadLetterTable)
	r.letters.remove(rec)
	r.track.done(x)
}

// deadLetters is the queue between promises (which must not block) and the goroutine that
// produces to the dead-letter topic. It holds at most the records the producer buffered.
type deadLetters struct {
	mu     sync.Mutex
	items  []deadLetter
	signal chan struct{}
}

func newDeadLetters() *deadLetters { return &deadLetters{signal: make(chan struct{}, 1)} }

func (d *deadLetters) push(dl deadLetter) {
	d.mu.Lock()
	d.items = append(d.items, dl)
	d.mu.Unlock()
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

// wake makes the dead-letter goroutine look at its queues.
func (d *deadLetters) wake() {
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

// requeue puts letters taken and not produced back at the head of the queue, in their order.
func (d *deadLetters) requeue(letters []deadLetter) {
	if len(letters) == 0 {
		return
	}
	d.mu.Lock()
	d.items = append(letters[:len(letters):len(letters)], d.items...)
	d.mu.Unlock()
	d.wake()
}

func (d *deadLetters) take() []deadLetter {
	d.mu.Lock()
	defer d.mu.Unlock()
	items := d.items
	d.items = nil
	return items
}

func (d *deadLetters) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.items)
}

func (r *Relay) deadLetterLoop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.dlq.signal:
			if err := r.produceDeadLetters(ctx); err != nil && ctx.Err() == nil {
				return err
			}
			if err := r.table.write(ctx, r.parked); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// produceDeadLetters parks the queued records. A record the dead-letter topic refuses for good
// too goes to the PostgreSQL table (deadTable); any other failure stops the relay without
// confirming past it: nothing is dropped silently. It waits for the abort of a lost session's
// records to end first: a letter is parked even when its session was lost (lost.go).
func (r *Relay) produceDeadLetters(ctx context.Context) error {
	select {
	case <-r.abortRunning():
	case <-ctx.Done():
		return nil
	}
	letters := r.dlq.take()
	// A letter's Produce context does not end with ctx, as the pipeline's does not (lost.go): the
	// producer may fail a request in flight whose context ended, and a stop then failed a letter
	// the broker had written, which the drain sent again (two copies of one letter). It ends with
	// the session, and with ctx only while its Produce call waits for buffer space.
	base := context.WithoutCancel(ctx)
	for i, dl := range letters {
		x := dl.txn
		// First, whichever destination the letter goes to: a record the open transaction holds
		// must end the run, not be lettered (delivery.held). A stop that cut the read short leaves
		// this letter and the rest owed: the drain reads again on the shutdown's time, and a
		// letter still owed then keeps the transaction from committing (exactlyOnce.finish aborts it).
		if dl.sent != nil {
			if err := r.delivery.held(ctx, dl.sent); err != nil {
				if errors.Is(err, errStopped) {
					r.dlq.requeue(letters[i:])
					return nil
				}
				return err
			}
		}
		if refusal := r.dlqTopicRefusal(); refusal != nil {
			// The topic refused the last letter for a reason that holds for every letter: do not
			// wait for franz-go to learn that again (one metadata refresh, 5 s, per letter).
			r.table.push(tableLetter{rec: dl.rec, refusal: refusal, txn: x})
			r.dlq.wake()
			continue
		}
		lctx, release := r.lost.withSession(base)
		waiting := context.AfterFunc(ctx, release)
		r.sink.Produce(lctx, dl.rec, func(rec *kgo.Record, err error) {
			defer release()
			if errors.Is(err, kgo.ErrAborting) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				// Aborted with the lost session's records, or its request ended by the session's
				// cancel: still owed (lost.go), queued again and produced once the abort ended. Or
				// shutdown while it waited for buffer space: queued again, drain produces it.
				r.dlq.push(deadLetter{rec: rec, txn: x})
				return
			}
			if err != nil {
				r.cfg.Metrics.ProduceError(metrics.ClassDeadLetterRefused)
				if sink.Rejected(err) {
					r.noteDLQRefusal(err)
					r.table.push(tableLetter{rec: rec, refusal: err, txn: x})
					r.dlq.wake()
					return
				}
				sink.TraceFailed(rec, err)
				r.lost.stopProduce()
				r.track.fail(fmt.Errorf("relay: dead-letter topic %s refused outbox id %s: %w (fix the topic; the relay replays from the last confirmed position)",
					rec.Topic, record.Header(rec, record.HeaderOutboxID), err))
				return
			}
			r.stats.DeadLettered.Add(1)
			r.parked(rec, x)
		})
		waiting()
	}
	return r.track.err()
}

// dlqRefusalFor is how long a refusal of the whole dead-letter topic (not authorized, missing,
// invalid) sends letters straight to the table before the topic is tried again.
const dlqRefusalFor = 30 * time.Second

func (r *Relay) noteDLQRefusal(err error) {
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.UnknownTopicOrPartition) &&
		!errors.Is(err, kerr.InvalidTopicException) {
		return // a letter too large: the next one may fit
	}
	r.dlqRefusal.Lock()
	r.dlqRefusal.err, r.dlqRefusal.until = err, time.Now().Add(dlqRefusalFor)
	r.dlqRefusal.Unlock()
}

func (r *Relay) dlqTopicRefusal() error {
	r.dlqRefusal.Lock()
	defer r.dlqRefusal.Unlock()
	if time.Now().Before(r.dlqRefusal.until) {
		return r.dlqRefusal.err
	}
	return nil
}
