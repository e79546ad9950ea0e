package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/schema"
	"github.com/cdc-relay/cdc-relay/sink"
)

// pipeline decodes messages in server order and produces their events. It owns the decoder
// and the current transaction.
func (r *Relay) pipeline(ctx context.Context, msgs <-chan []replication.Message) error {
	p := pipe{r: r}
	for {
		var batch []replication.Message
		select {
		case <-ctx.Done():
			return nil
		case <-r.track.failCh:
			return r.track.err()
		case <-r.delivery.due():
			if err := r.delivery.tick(ctx, p.cur != nil); err != nil {
				return err
			}
			continue
		case batch = <-msgs:
		}
		for i := range batch {
			if err := p.handle(ctx, &batch[i]); err != nil {
				return err
			}
			// A cancel stops the pipeline at once: the record produced last may have failed
			// waiting for buffer space (never buffered), and nothing after it may be produced,
			// or its key would get a gap. Its transaction stays unacknowledged, so the position
			// holds before it (DESIGN.md, "Shutdown"). A failed record stops it the same way.
			if ctx.Err() != nil {
				return nil
			}
			if r.track.broken.Load() {
				return r.track.err()
			}
		}
		if len(msgs) == 0 {
			if err := r.delivery.caughtUp(ctx, p.cur != nil); err != nil {
				return err
			}
		}
	}
}

// pipe is the pipeline's state between messages: the open transaction.
type pipe struct {
	r      *Relay
	cur    *txn
	stamp  *record.Stamp // the current transaction's position headers, formatted once
	losses int64         // the marks of lost sessions passed (lost.go)
}

func (p *pipe) handle(ctx context.Context, m *replication.Message) error {
	r := p.r
	if isLossMark(m) {
		p.losses++
		return nil
	}
	if m.Kind != replication.KindReset && r.lost.discard.Load() {
		return nil // the lost session's: the next session replays it (lost.go)
	}
	if m.Kind != replication.KindReset {
		if ok, err := r.delivery.ready(ctx); !ok {
			return err
		}
	}
	switch m.Kind {
	case replication.KindReset:
		if err := r.delivery.reset(); err != nil {
			return err
		}
		if !r.awaitAbort(ctx, p.losses) {
			return nil // stopped while the abort ran
		}
		r.dec.Reset()
		r.track.dropOpen()
		p.cur = nil
	case replication.KindKeepalive:
		if p.cur == nil && r.pastStop(m.ServerWALEnd) {
			return r.reachStop(ctx, m.ServerWALEnd)
		}
		if p.cur == nil {
			r.delivery.idle(m.ServerWALEnd)
		}
	case replication.KindData:
		out, err := r.dec.Decode(m.WALStart, m.Data)
		if err != nil && !outbox.IsBadRow(err) {
			return fmt.Errorf("relay: decode message at %s: %w", m.WALStart, err)
		}
		// The payload's buffer goes back to the stream once nothing reads it: now, but for an
		// event, whose payload is its record's value (DESIGN.md, "pgconn reuses its read buffer").
		lease := m.TakeLease()
		if out.Kind != decoder.KindEvent && err == nil {
			lease.Release()
			lease = replication.Lease{}
		}
		switch out.Kind {
		case decoder.KindBegin:
			if r.pastStop(out.CommitLSN) {
				return r.reachStop(ctx, out.CommitLSN) // this transaction is the next generation's
			}
			// A record held for good must pause reading, not grow the tracker (held.go).
			if !r.track.hasRoom(r.maxTxns) && !r.waitForRoom(ctx) {
				return nil // stopped while paused: the pipeline checks why after this message
			}
			p.cur = r.track.beginAt(out.CommitTime)
			r.cfg.Metrics.Sent(out.CommitTime, m.ServerTime)
			p.stamp = nil // made at the first event: most transactions a slot sees may have none
			r.stats.Transactions.Add(1)
			r.delivery.begin(out.CommitLSN)
		case decoder.KindEvent:
			if p.cur == nil {
				return fmt.Errorf("relay: event at %s outside a transaction", m.WALStart)
			}
			if p.stamp == nil {
				p.stamp = record.NewStamp(out.CommitLSN, out.CommitTime)
			}
			var berr error
			if r.cfg.Schema != nil && err == nil && out.Event.Payload != nil {
				// Before the record is made, and before it enters a Kafka transaction (schema.go).
				// A tombstone (nil payload) stays null in every format.
				var ok bool
				if err, ok, berr = r.encodeValue(ctx, &out.Event, m.WALStart); !ok {
					return berr // nil: stopped or halted while the registry was down; the pipeline checks which
				}
			}
			if produce, berr := r.delivery.record(); berr != nil || !produce {
				return berr // nil: a committed Kafka transaction has it (a replay)
			}
			r.produce(ctx, p.cur, p.stamp, out, err, lease)
			return r.delivery.produced(ctx)
		case decoder.KindCommit:
			if p.cur != nil {
				r.track.commit(p.cur, out.EndLSN)
			}
			p.cur = nil
			return r.delivery.committed(ctx, out.EndLSN)
		case decoder.KindNone:
			if err != nil && p.cur == nil && r.pastStop(m.WALStart) {
				return r.reachStop(ctx, m.WALStart)
			}
			if err != nil {
				return p.nonTransactional(ctx, out, err)
			}
		}
	}
	return nil
}

// nonTransactional handles a non-transactional logical message with the outbox prefix: it
// belongs to no committed transaction, so it is never published, but its content is kept: it
// is dead-lettered as a bad row, as a transaction of its own that ends at the message's LSN
// (or, were one open, with that transaction), so the position passes it only once it is
// parked. In exactly-once mode it is a transaction of its own for the checkpoint too: its
// record starts before its end, so a checkpoint past it skips it on a replay.
func (p *pipe) nonTransactional(ctx context.Context, out decoder.Output, badRow error) error {
	r := p.r
	x := p.cur
	if x == nil {
		x = r.track.begin()
		r.delivery.begin(out.EndLSN - 1)
	}
	produce, err := r.delivery.record()
	if err != nil {
		return err
	}
	if produce {
		stamp := record.NewStamp(out.EndLSN, time.Now()) // no commit time: when the relay read it
		r.produce(ctx, x, stamp, out, badRow, replication.Lease{})
	}
	if p.cur != nil {
		return nil
	}
	r.track.commit(x, out.EndLSN)
	return r.delivery.committed(ctx, out.EndLSN)
}

// halted reports whether the pipeline must produce nothing more of this session: it was lost,
// or a record failed for good (the pipeline stops at the end of the message).
func (r *Relay) halted() bool { return r.lost.discard.Load() || r.track.broken.Load() }

// produce builds out's record (r.build) and has sink publish it, or dead-letters it. lease is the loan of
// the buffer the record's value aliases: it is given back only once Kafka has acknowledged the
// record, when nothing reads the value any more. Every other outcome (a dead letter, which
// produces the same value again or writes it to the table; a failure; an abort; a stop) leaves
// the buffer to the garbage collector, so that nothing can read it after the stream reused it.
// What the relay keeps of the record to act on its outcome it knows from the event: its topic
// and key (the key's letters, deadletter_order.go), its outbox id, its value's size.
func (r *Relay) produce(ctx context.Context, x *txn, stamp *record.Stamp, out decoder.Output, badRow error, lease replication.Lease) {
	ev := out.Event
	k := letterKey{topic: ev.Topic, key: ev.AggregateID}
	id := ev.ID
	commitAt := out.CommitTime
	size := len(ev.Payload)
	r.track.add(x) // first: x stays unacknowledged if the wait below is cut short
	pub := r.build.Build(ev, stamp, record.LetterTo{Topic: r.cfg.DLQTopic, Relation: ev.Relation}, badRow)
	if !r.letters.wait(ctx, pub.Record, r.log, r.lost.discard.Load) {
		return // shutdown or a lost session while reading was paused: nothing after this is produced
	}
	if badRow != nil {
		r.stats.BadRows.Add(1)
		r.cfg.Metrics.ProduceError(metrics.ClassBadRow)
		r.log.Error("bad row: dead-lettering it", "lsn", out.CommitLSN, "relation", ev.Relation, "outbox_id", id, "cause", badRow)
		r.park(deadLetter{rec: schema.LetterHeaders(pub.Letter, badRow), txn: x, key: k, id: id})
		return
	}
	r.produced++
	seq := r.produced
	if pub.Refusal != nil {
		// Larger than the producer may buffer, with its headers: franz-go would fail it at once,
		// after Produce returned; parked now, it counts against the budget before the next record.
		r.refused(k, pub.Refusal, pub.Letter, x, id, seq, nil)
		return
	}
	// A letter of its key not parked yet: its replay must not come after this record (deadletter_order.go).
	if r.letters.holdsKey(k) && !r.letters.waitKey(ctx, k, id, r.log, r.halted) {
		return // shutdown, a lost session or a failure while it waited: nothing after this is produced
	}
	r.lost.produce.RLock()
	defer r.lost.produce.RUnlock()
	if r.lost.discard.Load() {
		return // the session was lost meanwhile (lost.go); its transaction was forgotten
	}
	pctx := r.lost.produceContext(ctx)
	r.lost.producing.Store(true)
	defer r.lost.producing.Store(false)
	if ctx.Err() != nil {
		return // stopping: nothing after this is produced, x stays unacknowledged (lost.stopProducing)
	}
	sent := pub.Record
	r.sink.Publish(pctx, pub, func(o sink.Outcome) {
		switch o.Failure {
		case sink.Delivered:
			if passed := r.letters.passed(k, seq); passed != nil {
				r.passedLetters(k, id, passed)
			}
			r.letters.signal()
			r.stats.Published.Add(1)
			r.stats.Bytes.Add(int64(size))
			r.cfg.Metrics.Acked(commitAt)
			r.track.done(x)
			lease.Release() // last: nothing reads the record's value after this promise (nor franz-go, nor a span)
		case sink.Aborted:
			// Aborted: the session was lost (its transaction was forgotten, the next session
			// replays it), or the relay stops after a failure.
		case sink.Unbuffered:
			// The session's Produce context ended: a stop while a Produce call waited for buffer
			// space (this record never buffered, the session's buffered ones failed with it, and
			// the pipeline produces nothing after it), or a lost session. Or the client closed at
			// the end of Run, the flush timed out. Its transaction stays unacknowledged, so the
			// confirmed position stops before it and the next start replays it.
		case sink.Refused:
			// sent: a transaction may hold an earlier attempt (delivery.held).
			r.refused(k, o.Err, o.Letter, x, id, seq, sent)
		default:
			// A producer failure, or a batch refused as too large although this
			// record fits on its own (the topic's limit changed): never confirm past it; the
			// restart replays it, and sizes batches from the topic's limit read anew.
			r.cfg.Metrics.ProduceError(metrics.ClassUndelivered)
			r.lost.stopProduce() // nothing buffered after it is sent (lost.go)
			r.track.fail(fmt.Errorf("relay: record for %s (outbox id %s) not delivered: %w", k.topic, id, o.Err))
		}
	})
}

// refused parks letter, refused for cause, the dead letter of the record of topic and key k,
// outbox id id, the seq'th record produced, of transaction x, which must not be sent (too large
// for the producer's buffer) or which Kafka refused for good; its
// key's later records wait for it. sent is the record when franz-go may have sent it: a
// transaction may hold that attempt (delivery.held).
func (r *Relay) refused(k letterKey, cause error, letter *kgo.Record, x *txn, id string, seq uint64, sent *kgo.Record) {
	r.cfg.Metrics.ProduceError(metrics.ClassRejected)
	r.log.Error("Kafka rejected a record for good: dead-lettering it", "topic", k.topic, "outbox_id", id, "cause", cause)
	r.park(deadLetter{rec: letter, txn: x, key: k, id: id, ordered: true, seq: seq, sent: sent})
}
