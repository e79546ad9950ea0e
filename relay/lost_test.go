package relay

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/replication"
)

// A dead letter still waiting for the dead-letter topic when the session is lost is parked once
// the abort ended, not forgotten. Row 1's topic refuses it once (a refusal for good that ends),
// so it becomes a letter, which the dead-letter topic holds (retriable errors); row 2, of the same
// key, waits behind it (deadletter_order.go; before that, it was acknowledged on the topic meanwhile).
// Then another process takes the slot. A relay that forgot the letter (franz-go aborts it with
// the buffer) replayed row 1 from the slot, and the topic, which takes it now, put it after row 2
// with nothing dead-lettered to say why: the key's order broken (the virtual-time simulation
// found it with a slot taken over during minutes of faults). Parking it confirms nothing: its
// transaction was forgotten, the replay covers it.
func TestLostSessionParksItsWaitingDeadLetters(t *testing.T) {
	onFixedHarness(t, func(t *testing.T, h *harness) {
		h.forGood = append(h.forGood, kerr.TopicAuthorizationFailed.Message)
		r, run := runStreaming(t, h)
		ctx := run.ctx

		dlqDown := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: simDLQ, Err: kerr.NotLeaderForPartition, Count: -1})
		defer dlqDown.Remove()
		h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "sim.t0", Err: kerr.TopicAuthorizationFailed, Count: 1})
		h.commit(ctx, oneRow(1), 0)
		waitFor(t, 10*time.Second, "row 1 dead-lettered, its letter held", func() bool { n, _ := r.letters.held(); return n == 1 })
		h.commit(ctx, oneRow(2), 0)
		waitFor(t, 10*time.Second, "row 2 waiting behind the letter of its key", r.letters.waiting.Load)

		aborting := r.abortRunning()
		h.srv.HoldSlot(4242) // another relay takes the slot the moment this one's session ends
		h.srv.DropAll()
		// Once the abort began, the dead-letter topic takes letters again: only the relay's choice
		// decides whether the aborted letter is parked.
		waitFor(t, 10*time.Second, "the lost session's abort to begin", func() bool { return r.abortRunning() != aborting })
		dlqDown.Remove()
		parked := func() bool { return r.stats.DeadLettered.Load() == 1 }
		for deadline := time.Now().Add(15 * time.Second); !parked() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if !parked() {
			held, _ := r.letters.held()
			t.Errorf("the letter of row 1, waiting for the dead-letter topic when the session was lost, was not parked within 15s (dead-lettered %d, letters held %d)",
				r.stats.DeadLettered.Load(), held)
		}
		if c := h.srv.Confirmed(); c >= h.committed[0].txn.EndLSN {
			t.Errorf("the slot is at %s, past row 1's transaction (end %s), whose letter belongs to a lost session", c, h.committed[0].txn.EndLSN)
		}

		// Back to the relay: it replays both rows, and the topic takes row 1 now; (c): row 1's first
		// delivery after row 2 is a broken order unless row 1 was dead-lettered.
		run.giveBack(t, h, h.checkEnd)
	})
}

// A clean stop while the relay holds a dead letter (the dead-letter topic refuses it for good,
// the table is down) leaves no later record of its key delivered. Row 1's topic refuses it once,
// so it becomes a letter nobody takes; row 2, of the same key, was acknowledged on the topic
// meanwhile, the stop's shutdown timeout ended with the letter still held, and the next start
// replayed row 1 onto the topic, which takes it now: after row 2, with nothing dead-lettered to
// say why (invariant c; the virtual-time simulation, seed 2722 with -sim.held-letters). Row 2
// now waits behind the letter (deadletter_order.go), and the replay delivers row 1, then row 2.
func TestStopHoldingALetterKeepsItsKeyInOrder(t *testing.T) {
	onFixedHarness(t, func(t *testing.T, h *harness) {
		h.forGood = append(h.forGood, kerr.TopicAuthorizationFailed.Message)
		r, run := runStreaming(t, h)
		ctx := run.ctx
		tb := r.table.(*simTable)
		tb.mu.Lock()
		tb.downUntil = time.Now().Add(time.Hour)
		tb.mu.Unlock()
		dlqRefuses := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: simDLQ, Err: kerr.TopicAuthorizationFailed, Count: -1})
		defer dlqRefuses.Remove()
		h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "sim.t0", Err: kerr.TopicAuthorizationFailed, Count: 1})
		h.commit(ctx, oneRow(1), 0)
		waitFor(t, 10*time.Second, "row 1 dead-lettered, its letter held by the table", func() bool { return tb.len() == 1 })
		h.commit(ctx, oneRow(2), 0)
		waitFor(t, 10*time.Second, "row 2 acknowledged or waiting", func() bool { return r.stats.Published.Load() == 1 || r.letters.waiting.Load() })
		if err := run.stop(); err != nil {
			t.Fatalf("Run = %v after a cancel", err)
		}
		if n := r.stats.Published.Load(); n != 0 {
			t.Errorf("row 2 was acknowledged on its topic while the letter of row 1, of its key, was held; the stop left that letter unparked")
		}

		// The next start, the faults gone: it replays both rows, and the topic takes row 1 now.
		dlqRefuses.Remove()
		h.finalRun(nil)
		h.checkEnd()
		h.failOnViolations()
	})
}

// The abort of a lost session ends at once and sends nothing of it again, even a record whose
// produce request timed out (REQUEST_TIMED_OUT: Kafka may have written it). franz-go's idempotent
// producer retries such a record until it learns the outcome, also through AbortBufferedRecords,
// unless told it may fail it (kgo.AllowIdempotentProduceCancellation): the record was sent again
// after the slot was lost for as long as Kafka refused it, and landed after the new holder's
// record of its key once Kafka took it (the virtual-time simulation: an abort of 28 s). Failed
// instead, it replays from the slot like every record of the lost session.
func TestLostSessionSendsNothingAgainWhoseOutcomeIsUnknown(t *testing.T) {
	onFixedHarness(t, func(t *testing.T, h *harness) {
		r, run := runStreaming(t, h)
		ctx := run.ctx

		// The relay's produce requests (acks=all) time out once, then fail retriably; the new
		// holder's (acks=1, below) go through.
		relays := func(req kmsg.Request) bool { return req.(*kmsg.ProduceRequest).Acks == -1 }
		timedOut := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: 1, When: relays})
		defer timedOut.Remove()
		down := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotLeaderForPartition, Count: -1, When: relays})
		defer down.Remove()
		h.commit(ctx, oneRow(1), 0)
		waitFor(t, 10*time.Second, "the relay's record buffered", func() bool { return r.sink.Buffered() == 1 })
		time.Sleep(50 * time.Millisecond) // its first request timed out; it is retried

		aborting := r.abortRunning()
		h.srv.HoldSlot(4242) // another relay takes the slot the moment this one's session ends
		h.srv.DropAll()
		waitFor(t, 10*time.Second, "the lost session's abort to begin", func() bool { return r.abortRunning() != aborting })
		select {
		case <-r.abortRunning():
		case <-time.After(10 * time.Second):
			t.Errorf("the abort of the lost session did not end within 10s: a record whose outcome is unknown is still retried (%d buffered)", r.sink.Buffered())
		}
		newHolder := mustClient(append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())...)
		defer newHolder.Close()
		if err := newHolder.ProduceSync(ctx, &kgo.Record{Topic: "sim.t0", Key: []byte("k"), Value: []byte(`{"from":"the new holder"}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		down.Remove() // Kafka takes the relay's requests again: a retry still going lands now
		waitFor(t, 10*time.Second, "nothing buffered", func() bool { return r.sink.Buffered() == 0 })
		if after := recordsAfterNewHolder(t, h); after != 0 {
			t.Errorf("%d records of the relay that lost the slot landed after the new holder's record of the key", after)
		}

		run.giveBack(t, h) // back to the relay: it replays the row
	})
}

// A KindReset that waited for an abort while the session it starts was lost too starts a lost
// session: its messages stay discarded until the next session. Three sessions in a row: the
// first's loss began an abort that took long (here held open), the second session's reset waited
// for it, the second session was lost meanwhile, and once the abort ended the pipeline resumed
// and produced the second session's rows, after it had lost the slot (the virtual-time
// simulation, its producer watched by the harness, invariant (l)).
func TestResetOfASessionLostMeanwhileDoesNotResume(t *testing.T) {
	onFixedHarness(t, func(t *testing.T, h *harness) {
		r, run := runStreaming(t, h)
		ctx := run.ctx

		down := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotLeaderForPartition, Count: -1})
		defer down.Remove()
		h.commit(ctx, oneRow(1), 0)
		waitFor(t, 10*time.Second, "the row buffered", func() bool { return r.sink.Buffered() == 1 })
		held := make(chan struct{}) // an abort still running: the next one waits for it
		r.lost.mu.Lock()
		r.lost.done = held
		r.lost.mu.Unlock()
		h.srv.DropAll() // the first session is lost; the second replays the row at once
		waitFor(t, 10*time.Second, "the second session's row waiting for the pipeline", func() bool {
			return len(h.srv.Sessions()) == 2 && r.stream.State() == replication.StateStreaming && len(r.msgs) > 0
		})
		h.srv.HoldSlot(4242) // the second session is lost too, and another process holds the slot
		h.srv.DropAll()
		waitFor(t, 10*time.Second, "the second loss", func() bool { return r.lost.losses.Load() == 2 })
		close(held)
		waitFor(t, 10*time.Second, "the aborts", func() bool { return isClosed(r.abortRunning()) })
		waitFor(t, 10*time.Second, "the pipeline through the lost sessions' messages", func() bool { return len(r.msgs) == 0 })
		time.Sleep(100 * time.Millisecond) // nothing to await: what must not happen is a produce
		if n := r.sink.Buffered(); n > 0 {
			t.Errorf("the relay produced %d records of a session it had lost, before its next session", n)
		}

		down.Remove()
		run.giveBack(t, h) // back to the relay: the third session delivers the row
	})
}

// A clean stop flushes what the producer buffers. franz-go fails a buffered record whose Produce
// context ended, and the pipeline's was Run's: a stop failed every record not yet in flight
// (replayed on the next start) instead of letting Kafka take it within the shutdown timeout.
func TestCleanStopFlushesBufferedRecords(t *testing.T) {
	onFixedHarness(t, func(t *testing.T, h *harness) {
		h.sc.shutdown = time.Minute // franz-go retries after its next metadata refresh, seconds away
		r, run := runStreaming(t, h)
		ctx := run.ctx
		// Kafka refuses the records retriably until the stop has begun: they wait in the buffer.
		down := commitWhileKafkaRefuses(ctx, h, 20)
		waitFor(t, 10*time.Second, "the records buffered", func() bool { return r.sink.Buffered() == 20 })
		run.cancel()
		down.Remove() // within the shutdown timeout, Kafka takes what the flush sends
		if err := <-run.done; err != nil {
			t.Fatalf("Run = %v after a cancel", err)
		}
		if c, end := h.srv.Confirmed(), h.committed[len(h.committed)-1].txn.EndLSN; c < end {
			t.Errorf("a clean stop left the slot at %s, short of %s: the records buffered when it began were failed, not flushed (published %d of 20)",
				c, end, r.stats.Published.Load())
		}
		h.failOnViolations()
	})
}

// A clean stop does not cancel a dead letter already sent to the dead-letter topic. The letters'
// Produce context ended with Run's, and franz-go, which may fail a request in flight
// (AllowIdempotentProduceCancellation), failed the letter's with context.Canceled although the
// broker had written it; the letter was queued again and the shutdown's drain sent it a second
// time: two copies of one letter, which dead-letters replay then counts as two refusals (the
// end-to-end replay test saw that in CI). Here the stop comes while the letter's request is at
// the broker, which then appends it: the topic holds it once.
func TestCleanStopKeepsTheDeadLetterInFlight(t *testing.T) {
	onFixedHarness(t, func(t *testing.T, h *harness) {
		var run *relayRun
		var stopped atomic.Bool
		h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: simDLQ, Count: -1, When: func(kmsg.Request) bool {
			if stopped.CompareAndSwap(false, true) {
				run.cancel()    // the stop, while the letter's request is at the broker
				synctest.Wait() // every goroutine the cancel wakes has acted on it
			}
			return false // not faulted: the broker appends the letter and answers
		}})
		r, run := runStreaming(t, h)
		h.commit(run.ctx, []simTxnSpec{{rows: []simRow{{id: 1, key: "k", class: rowBad, payload: `{"n":1}`}}}}, 0)
		if err := <-run.done; err != nil {
			t.Fatalf("Run = %v after a cancel", err)
		}
		if !stopped.Load() {
			t.Fatal("no dead letter was sent before the stop")
		}
		if n := h.committedCount(t, simDLQ); n != 1 || r.stats.DeadLettered.Load() != 1 {
			t.Errorf("the dead-letter topic holds %d copies of the one letter (dead-lettered %d), want 1: the stop canceled the letter's request after the broker took it, and the drain sent it again",
				n, r.stats.DeadLettered.Load())
		}
	})
}

// A record that fails for good stops the relay, and nothing produced after it is sent. franz-go
// fails the failed record's partition buffer with it, and the space that frees woke the
// pipeline's Produce call waiting for it, whose record franz-go sent at once: a later record of
// the key on the topic ahead of the failed ones, whose replay then filled the gap out of order
// (seed 727 of the virtual-time simulation).
func TestFailedRecordStopsTheRecordWaitingForBufferSpace(t *testing.T) {
	onFixedHarness(t, func(t *testing.T, h *harness) {
		h.sc.maxRecords = 2
		r, run := runStreaming(t, h)
		ctx := run.ctx

		down := commitWhileKafkaRefuses(ctx, h, 3)
		waitFor(t, 10*time.Second, "the third row waiting for buffer space", func() bool { return r.sink.Buffered() == 3 && r.lost.producing.Load() }) // two buffered, one blocked
		h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.UnknownServerError, Count: 1})
		down.Remove() // the next try of the two buffered rows fails for good; Kafka takes what comes after
		select {
		case err := <-run.done:
			if err == nil {
				t.Fatal("Run returned nil after a record failed for good")
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return within 20s of a record failing for good")
		}
		if n := r.stats.Published.Load(); n != 0 {
			t.Errorf("%d records were acknowledged on sim.t0 after the ones before them failed for good: the replay fills that gap out of order", n)
		}
	})
}

// onFixedHarness runs body, in parallel with other tests, in a synctest bubble on a fixed
// harness (its in-memory network needs one).
func onFixedHarness(t *testing.T, body func(t *testing.T, h *harness)) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) { body(t, fixedHarness(t, 20*time.Millisecond)) })
}

// commitWhileKafkaRefuses makes Kafka refuse every produce request retriably and commits n
// one-row transactions of one key; removing the returned fault ends the outage.
func commitWhileKafkaRefuses(ctx context.Context, h *harness, n int) *kfake.FaultHandle {
	down := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotLeaderForPartition, Count: -1})
	var txns []simTxnSpec
	for i := range n {
		txns = append(txns, oneRow(int64(i+1))...)
	}
	h.commit(ctx, txns, 0)
	return down
}

// relayRun is a relay running on a fixed harness (runStreaming).
type relayRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan error // Run's result
}

// runStreaming runs a relay on h until it streams; the test ends it with stop.
func runStreaming(t *testing.T, h *harness) (*Relay, *relayRun) {
	t.Helper()
	r, _ := h.newRelay(0)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	run := &relayRun{ctx: ctx, cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- r.Run(ctx) }()
	waitFor(t, 10*time.Second, "streaming", func() bool { return r.stream.State() == replication.StateStreaming })
	return r, run
}

// stop cancels the run and returns Run's result.
func (run *relayRun) stop() error {
	run.cancel()
	return <-run.done
}

// giveBack releases the slot to the relay (another process held it), waits until the relay
// confirmed every transaction committed, and stops it cleanly with the checks.
func (run *relayRun) giveBack(t *testing.T, h *harness, checks ...func()) {
	t.Helper()
	h.srv.HoldSlot(0)
	end := h.committed[len(h.committed)-1].txn.EndLSN
	waitFor(t, 20*time.Second, "the slot confirmed by the relay again", func() bool { return h.srv.Confirmed() >= end })
	run.stopClean(t, h, checks...)
}

// stopClean cancels the run, which must return nil, runs the checks, and reports the
// harness's violations.
func (run *relayRun) stopClean(t *testing.T, h *harness, checks ...func()) {
	t.Helper()
	if err := run.stop(); err != nil {
		t.Errorf("Run = %v after a cancel", err)
	}
	for _, check := range checks {
		check()
	}
	h.failOnViolations()
}
