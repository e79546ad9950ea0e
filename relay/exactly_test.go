package relay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	ktxn "github.com/cdc-relay/cdc-relay/sink/txn"
)

// onExactlyOnceHarness is onFixedHarness with the relay in exactly-once mode.
func onExactlyOnceHarness(t *testing.T, body func(t *testing.T, h *harness)) {
	onFixedHarness(t, func(t *testing.T, h *harness) {
		h.tune = func(c *Config) { c.ExactlyOnce = &ExactlyOnce{Interval: 20 * time.Millisecond} }
		t.Cleanup(func() {
			if t.Failed() {
				h.logw.mu.Lock()
				t.Logf("relay log:\n%s", h.logw.b.String())
				h.logw.mu.Unlock()
			}
		})
		body(t, h)
	})
}

// commits matches the EndTxn requests that commit.
func commits(req kmsg.Request) bool { return req.(*kmsg.EndTxnRequest).Commit }

// A committed Kafka transaction's checkpoint is what the relay confirms, and a read_committed
// reader of the checkpoint topic finds it there. (The position handed to the stream, not the
// simulated slot's: the harness's Kafka index, which checks each status update, reads to the
// end offset, which a transaction's commit marker holds beyond its last record.)
func TestExactlyOnceConfirmsTheCommittedCheckpoint(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		r, run := runStreaming(t, h)
		h.commit(run.ctx, oneRow(1), 0)
		end := h.committed[0].txn.EndLSN
		waitFor(t, 10*time.Second, "the relay to confirm past the row", func() bool { return r.stream.Flushed() >= end })
		cp, ok, err := ktxn.ReadCheckpoint(context.Background(), append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...)),
			ktxn.DefaultCheckpointTopic, "sim_slot")
		if err != nil || !ok || cp.Position < end {
			t.Errorf("checkpoint %+v (found %v, %v): want one at %s or later", cp, ok, err, end)
		}
		if err := run.stop(); err != nil {
			t.Errorf("Run = %v after a cancel", err)
		}
	})
}

// A commit Kafka refuses confirms nothing: the run ends (exit 1) saying the transaction was
// not committed, and the slot stays where it was; the restart replays.
func TestExactlyOnceRefusedCommitConfirmsNothing(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.InvalidTxnState, Count: -1, When: commits})
		r, run := runStreaming(t, h)
		before := r.stream.Flushed()
		h.commit(run.ctx, oneRow(1), 0)
		err := run.ended(t, "after its commit was refused")
		if err == nil || !strings.Contains(err.Error(), "commit the Kafka transaction") {
			t.Errorf("Run = %v, want the refused commit", err)
		}
		if c := r.stream.Flushed(); c != before {
			t.Errorf("the relay confirmed %s (from %s) although nothing was committed", c, before)
		}
	})
}

// A relay whose commit meets PRODUCER_FENCED (another relay took the transactional id) stops
// without confirming, and says so.
func TestExactlyOnceFencedCommitStopsTheRelay(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.ProducerFenced, Count: -1})
		r, run := runStreaming(t, h)
		before := r.stream.Flushed()
		h.commit(run.ctx, oneRow(1), 0)
		err := run.ended(t, "after it was fenced")
		if !ktxn.IsFenced(err) || !strings.Contains(err.Error(), "another relay holds this slot's transactional id") {
			t.Errorf("Run = %v, want the fence", err)
		}
		if c := r.stream.Flushed(); c != before {
			t.Errorf("the relay confirmed %s (from %s) although nothing was committed", c, before)
		}
	})
}

// ended returns Run's result once it ends on its own, within 30 s (of the bubble's time).
func (run *relayRun) ended(t *testing.T, what string) error {
	t.Helper()
	select {
	case err := <-run.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("the run did not end %s", what)
		return nil
	}
}
