package relay

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/replication"
)

// A dead letter still waiting for the dead-letter topic when the session is lost is parked once
// the abort ended, not forgotten. Row 1's topic refuses it once (a refusal for good that ends),
// so it becomes a letter, which the dead-letter topic holds (retriable errors); row 2, of the same
// key, is acknowledged on the topic meanwhile. Then another process takes the slot. A relay that
// forgot the letter (franz-go aborts it with the buffer) replayed row 1 from the slot, and the
// topic, which takes it now, put it after row 2 with nothing dead-lettered to say why: the key's
// order broken (the virtual-time simulation found it with a slot taken over during minutes of
// faults). Parking it confirms nothing: its transaction was forgotten, the replay covers it.
func TestLostSessionParksItsWaitingDeadLetters(t *testing.T) {
	t.Parallel()
	h := fixedHarness(t, 20*time.Millisecond)
	h.forGood = append(h.forGood, kerr.TopicAuthorizationFailed.Message)
	r, _ := h.newRelay(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	waitFor(t, 10*time.Second, "streaming", func() bool { return r.stream.State() == replication.StateStreaming })

	dlqDown := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: simDLQ, Err: kerr.NotLeaderForPartition, Count: -1})
	defer dlqDown.Remove()
	h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "sim.t0", Err: kerr.TopicAuthorizationFailed, Count: 1})
	h.commit(ctx, oneRow(1), 0)
	waitFor(t, 10*time.Second, "row 1 dead-lettered, its letter held", func() bool { n, _ := r.letters.held(); return n == 1 })
	h.commit(ctx, oneRow(2), 0)
	waitFor(t, 10*time.Second, "row 2 acknowledged on its topic", func() bool { return r.stats.Published.Load() == 1 })

	aborting := r.abortRunning()
	h.srv.HoldSlot(4242) // another relay takes the slot the moment this one's session ends
	h.srv.DropAll()
	waitFor(t, 10*time.Second, "the lost session's abort", func() bool {
		select {
		case <-r.abortRunning():
			return r.abortRunning() != aborting
		default:
			return false
		}
	})
	dlqDown.Remove()
	parked := func() bool { return r.stats.DeadLettered.Load() == 1 }
	for deadline := time.Now().Add(5 * time.Second); !parked() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if !parked() {
		held, _ := r.letters.held()
		t.Errorf("the letter of row 1, waiting for the dead-letter topic when the session was lost, was not parked within 5s (dead-lettered %d, letters held %d)",
			r.stats.DeadLettered.Load(), held)
	}
	if c := h.srv.Confirmed(); c >= h.committed[0].txn.EndLSN {
		t.Errorf("the slot is at %s, past row 1's transaction (end %s), whose letter belongs to a lost session", c, h.committed[0].txn.EndLSN)
	}

	h.srv.HoldSlot(0) // back to the relay: it replays both rows, and the topic takes row 1 now
	end := h.committed[1].txn.EndLSN
	waitFor(t, 20*time.Second, "the slot confirmed both rows", func() bool { return h.srv.Confirmed() >= end })
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run = %v", err)
	}
	h.checkEnd() // (c): row 1's first delivery after row 2 is a broken order unless row 1 was dead-lettered
	h.failOnViolations()
}
