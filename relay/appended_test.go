package relay

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/record"
)

// At least once, a produce the broker appended but answered REQUEST_TIMED_OUT, whose retry
// (franz-go's, with the same sequence) is refused for good, costs a second copy at most: the
// record is dead-lettered, and the partition's next record is written. In exactly-once mode the
// same faults made Kafka take the next record for a duplicate of the appended one and drop it
// (DESIGN.md E8): the failed batch's sequence numbers went to the next batch under the same
// producer epoch. The idempotent producer pins a written batch's epoch and bumps the epoch when
// such a batch fails (franz-go's recBuf.failAllRecords); a franz-go without that bump loses row 2
// here, acknowledged and never written, and the relay confirms past it.
func TestRefusedRetryOfAnAppendedProduceLosesNoLaterRecord(t *testing.T) {
	onFixedHarness(t, func(t *testing.T, h *harness) {
		retried := h.appendedThenRefused()
		r, run := runStreaming(t, h)
		h.commit(run.ctx, oneRow(1), 0)
		waitFor(t, 30*time.Second, "row 1 dead-lettered", func() bool { return r.stats.DeadLettered.Load() == 1 })
		retried.answeredOnceEach(t)
		h.commit(run.ctx, oneRow(2), 0)
		end := h.committed[1].txn.EndLSN
		waitFor(t, 30*time.Second, "the relay to confirm past row 2", func() bool { return r.stream.Flushed() >= end })
		run.stopClean(t, h)
		opts := append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...))
		seen := map[string]map[string]int{} // topic -> outbox id -> copies
		for _, topic := range []string{"sim.t0", simDLQ} {
			seen[topic] = map[string]int{}
			if err := kafkatxn.ReadCommitted(context.Background(), opts, topic, func(rec *kgo.Record) {
				seen[topic][string(record.Header(rec, record.HeaderOutboxID))]++
			}); err != nil {
				t.Fatal(err)
			}
		}
		if n := seen["sim.t0"]["2"]; n != 1 {
			t.Errorf("sim.t0 holds %d copies of row 2, want 1 (records by outbox id: %v)", n, seen)
		}
		if seen["sim.t0"]["1"]+seen[simDLQ]["1"] == 0 {
			t.Errorf("row 1 is neither on sim.t0 nor dead-lettered (records by outbox id: %v)", seen)
		}
	})
}

// appendedRetry is the faults of appendedThenRefused.
type appendedRetry struct{ timedOut, refused *kfake.FaultHandle }

// appendedThenRefused makes, in order, the first produce to sim.t0 appended and answered
// REQUEST_TIMED_OUT (kfake appends on that error, as a broker may), and its retry refused for
// good.
func (h *harness) appendedThenRefused() appendedRetry {
	return appendedRetry{
		timedOut: h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "sim.t0", Err: kerr.RequestTimedOut}),
		refused:  h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "sim.t0", Err: kerr.TopicAuthorizationFailed}),
	}
}

// answeredOnceEach fails t unless each fault answered one produce.
func (a appendedRetry) answeredOnceEach(t *testing.T) {
	t.Helper()
	if a.timedOut.Hits() != 1 || a.refused.Hits() != 1 {
		t.Fatalf("the faults answered %d and %d produces, want 1 and 1", a.timedOut.Hits(), a.refused.Hits())
	}
}
