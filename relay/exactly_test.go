package relay

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/testkit/simwal"
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
		cp, ok, err := kafkatxn.ReadCheckpoint(context.Background(), append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...)),
			kafkatxn.DefaultCheckpointTopic, "sim_slot")
		if err != nil || !ok || cp.Position < end {
			t.Errorf("checkpoint %+v (found %v, %v): want one at %s or later", cp, ok, err, end)
		}
		if err := run.stop(); err != nil {
			t.Errorf("Run = %v after a cancel", err)
		}
	})
}

// failedCommit runs a relay on h whose Kafka answers EndTxn as fault says, commits one row,
// and returns Run's error once the run ended on its own; the test fails if the relay confirmed
// anything meanwhile.
func failedCommit(t *testing.T, h *harness, fault kfake.Fault) error {
	t.Helper()
	fault.Keys, fault.Count = []kmsg.Key{kmsg.EndTxn}, -1
	h.kafka.Fault(fault)
	r, run := runStreaming(t, h)
	before := r.stream.Flushed()
	h.commit(run.ctx, oneRow(1), 0)
	err := run.ended(t, "after its commit failed")
	if c := r.stream.Flushed(); c != before {
		t.Errorf("the relay confirmed %s (from %s) although nothing was committed (%v)", c, before, err)
	}
	return err
}

// A commit Kafka refuses confirms nothing: the run ends (exit 1) saying the transaction was
// not committed, and the restart replays.
func TestExactlyOnceRefusedCommitConfirmsNothing(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		err := failedCommit(t, h, kfake.Fault{Err: kerr.InvalidTxnState, When: commits})
		if err == nil || !strings.Contains(err.Error(), "commit the Kafka transaction") {
			t.Errorf("Run = %v, want the refused commit", err)
		}
	})
}

// A relay whose commit meets PRODUCER_FENCED (another relay took the transactional id) stops
// without confirming, and says so.
func TestExactlyOnceFencedCommitStopsTheRelay(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		err := failedCommit(t, h, kfake.Fault{Err: kerr.ProducerFenced})
		if !kafkatxn.IsFenced(err) || !strings.Contains(err.Error(), "another relay holds this slot's transactional id") {
			t.Errorf("Run = %v, want the fence", err)
		}
	})
}

// A commit whose answer is lost (REQUEST_TIMED_OUT) has an unknown outcome: the relay confirms
// nothing and ends; its restart reads the checkpoint, committed or not, and replays from the
// slot (franz-go's abort that follows reloads the producer id, which aborts the transaction if
// it was still open).
func TestExactlyOnceUnknownCommitOutcomeConfirmsNothing(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		if err := failedCommit(t, h, kfake.Fault{Err: kerr.RequestTimedOut, When: commits}); !errors.Is(err, kafkatxn.ErrOutcomeUnknown) {
			t.Errorf("Run = %v, want an unknown outcome", err)
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

// A checkpoint read that meets a partition without a leader (LEADER_NOT_AVAILABLE, as while a
// restarted broker elects one) waits and reads again, saying what it waits for, instead of
// ending the run: the relay then publishes and confirms as usual. The faults answer only the
// read's listings of end offsets, those after the fence's InitProducerID (the start's check of
// the topic lists them too, before).
func TestExactlyOnceCheckpointReadWaitsForAPartitionLeader(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		noLeader := faultCheckpointReadAfterFence(h, kerr.LeaderNotAvailable, 3, listsEnds)
		r, run := runStreaming(t, h)
		h.commit(run.ctx, oneRow(1), 0)
		end := h.committed[0].txn.EndLSN
		waitFor(t, 60*time.Second, "the relay to confirm past the row", func() bool { return r.stream.Flushed() >= end })
		if n := noLeader.Hits(); n != 3 {
			t.Errorf("the checkpoint read met LEADER_NOT_AVAILABLE %d times, want 3", n)
		}
		h.logw.mu.Lock()
		log := h.logw.b.String()
		h.logw.mu.Unlock()
		if n := strings.Count(log, "reading the checkpoint: Kafka is not ready yet, waiting"); n != 3 || !strings.Contains(log, "LEADER_NOT_AVAILABLE") {
			t.Errorf("%d log lines say the read waits, want 3 naming LEADER_NOT_AVAILABLE", n)
		}
		if err := run.stop(); err != nil {
			t.Errorf("Run = %v after a cancel", err)
		}
	})
}

// faultCheckpointReadAfterFence answers err to count (-1: every) listings of the checkpoint
// topic's offsets that match, once the start's InitProducerID went out: those of the read,
// not of the start's check of the topic, which lists it too, before the fence.
func faultCheckpointReadAfterFence(h *harness, err *kerr.Error, count int, match func(kmsg.Request) bool) *kfake.FaultHandle {
	var fenced atomic.Bool
	h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Observe: true, Count: -1,
		When: func(kmsg.Request) bool { fenced.Store(true); return true }})
	return h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: kafkatxn.DefaultCheckpointTopic,
		Err: err, Count: count, When: func(req kmsg.Request) bool { return fenced.Load() && match(req) }})
}

// listsEnds reports whether a ListOffsets request asks for end offsets (the read's first
// listing, which ends it on an error; its listing of start offsets does not).
func listsEnds(req kmsg.Request) bool {
	for _, t := range req.(*kmsg.ListOffsetsRequest).Topics {
		for _, p := range t.Partitions {
			if p.Timestamp == -1 {
				return true
			}
		}
	}
	return false
}

// A checkpoint read that fails for a reason waiting does not change ends the run at once: a
// checkpoint topic the relay may not read.
func TestExactlyOnceCheckpointReadRefusedEndsTheRun(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		faultCheckpointReadAfterFence(h, kerr.TopicAuthorizationFailed, -1, func(kmsg.Request) bool { return true })
		r, _ := h.newRelay(0)
		run := &relayRun{done: make(chan error, 1)}
		go func() { run.done <- r.Run(context.Background()) }()
		err := run.ended(t, "after the checkpoint read was refused")
		if err == nil || !strings.Contains(err.Error(), "read the checkpoint") || !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("Run = %v, want the refused checkpoint read", err)
		}
	})
}

// A Kafka transaction still inside one PostgreSQL transaction at twice the interval is
// committed there, a split by time (E6), however few records it holds: the walsender pauses
// for five intervals after the first 100 of 300 rows (a transaction slow to decode), and the
// first commit's checkpoint counts those 100 of the transaction, its position still before it.
// Without the time bound the first commit waits for the transaction's end: no split. The run
// stops during the pause, before a second commit (the e2e test replays a split whole).
func TestExactlyOnceSplitsATransactionStillOpenAtTwiceTheInterval(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		const rows, before, interval = 300, 100, 20 * time.Millisecond // onExactlyOnceHarness's interval
		var paused atomic.Bool
		h.srv.Script = func(e simwal.Event) simwal.Action {
			// The session's XLogData: Begin, Relation, then the rows.
			if e.Sent == 2+before && !paused.Swap(true) {
				return simwal.Action{Pause: 5 * interval}
			}
			return simwal.Action{}
		}
		commit := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Observe: true, Count: -1, When: commits})
		_, run := runStreaming(t, h)
		h.commit(run.ctx, rowsOfOneTxn(rows), 0)
		tx := h.committed[0].txn
		waitFor(t, 10*time.Second, "the first Kafka commit", func() bool { return commit.Hits() > 0 })
		run.stopClean(t, h)
		cps := h.committedCheckpoints(t)
		if len(cps) != 1 || cps[0].Split != (kafkatxn.Split{LSN: tx.CommitLSN, Records: before}) || cps[0].Position >= tx.CommitLSN {
			t.Errorf("committed checkpoints %+v: want one, a split of the first %d records of the transaction committing at %s (end %s), the position before it",
				cps, before, tx.CommitLSN, tx.EndLSN)
		}
	})
}

// A produce the broker appended but answered REQUEST_TIMED_OUT, whose retry (franz-go's, with
// the same sequence) is refused for good, is in the open transaction already: the relay reads
// the partition before it dead-letters the record and finds it there. franz-go, told the batch
// failed, gives its sequence numbers to the partition's next batch, which Kafka acknowledges as
// a duplicate of the written one without writing it, so the transaction must not commit: the
// run ends, confirming nothing past the row, and the restart delivers the row once, with no
// letter (DESIGN.md E8). Delivering the held record and committing lost the partition's next
// record (the virtual-time simulation's exactly-once seed 159630); lettering it showed it twice.
func TestExactlyOnceRefusedRetryOfAnAppendedProduceEndsTheRunAndReplays(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		retried := h.appendedThenRefused()
		r, run := runStreaming(t, h)
		h.commit(run.ctx, oneRow(1), 0)
		end := h.committed[0].txn.EndLSN
		err := run.ended(t, "after the refused retry")
		if !errors.Is(err, kafkatxn.ErrNotCommitted) || !strings.Contains(err.Error(), "first produce is in the open transaction") {
			t.Errorf("Run = %v, want the held record's stop (txn.ErrNotCommitted)", err)
		}
		if c := r.stream.Flushed(); c >= end {
			t.Errorf("the relay confirmed %s, past the row (end %s), before its transaction committed", c, end)
		}
		retried.answeredOnceEach(t)
		r2, run2 := runStreaming(t, h)
		waitFor(t, 30*time.Second, "the restart to confirm past the row", func() bool { return r2.stream.Flushed() >= end })
		if err := run2.stop(); err != nil {
			t.Errorf("the restart's Run = %v after a cancel", err)
		}
		h.expectCommitted(t, map[string]int{"sim.t0": 1, simDLQ: 0})
	})
}

// A commit that was sent and failed while the run was stopping ends the run with its failure,
// not as a clean stop: its transaction is closed and nothing of it committed, and a pipeline
// that went on as if stopped cleanly could take one more batch and confirm an idle keepalive's
// WAL end past the records the failure aborted (the virtual-time simulation's exactly-once
// seeds 3815 and 7823 found that; commitIfDue let a failure pass whenever ctx had ended).
// Here the stop comes while the commit's EndTxn is in flight, and Kafka answers it
// PRODUCER_FENCED: Run reports the fence, and nothing is confirmed past the row.
func TestExactlyOnceCommitFailedDuringTheStopEndsTheRunWithItsFailure(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		var run *relayRun
		var r *Relay
		var stopping atomic.Bool
		h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.ProducerFenced, Count: -1, When: func(req kmsg.Request) bool {
			if !commits(req) {
				return false
			}
			stopping.Store(true)
			run.cancel() // the stop, while this commit is in flight
			return true
		}})
		r, run = runStreaming(t, h)
		before := r.stream.Flushed()
		h.commit(run.ctx, oneRow(1), 0)
		err := run.ended(t, "after the stop")
		if !stopping.Load() {
			t.Fatal("no commit was sent")
		}
		if !kafkatxn.IsFenced(err) {
			t.Errorf("Run = %v, want the fence its commit met", err)
		}
		if c := r.stream.Flushed(); c != before {
			t.Errorf("the relay confirmed %s (from %s) although nothing was committed", c, before)
		}
	})
}

// A relay whose principal may write a topic but not read it cannot tell whether the open
// transaction holds an earlier attempt of a record Kafka refused: it dead-letters the record
// (at worst a second copy, never a loss) and goes on, instead of ending the run on the read,
// which its restart would be refused again, for ever.
func TestExactlyOnceRefusedRecordOfATopicTheRelayMayNotReadIsDeadLettered(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		refused := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "sim.t0", Err: kerr.TopicAuthorizationFailed})
		var checking atomic.Bool // the test's own reads below may read
		listing := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: "sim.t0", Err: kerr.TopicAuthorizationFailed, Count: -1,
			When: func(kmsg.Request) bool { return refused.Hits() > 0 && !checking.Load() }})
		r, run := runStreaming(t, h)
		h.commit(run.ctx, oneRow(1), 0)
		end := h.committed[0].txn.EndLSN
		waitFor(t, 30*time.Second, "the relay to confirm past the row", func() bool { return r.stream.Flushed() >= end })
		if refused.Hits() != 1 || listing.Hits() == 0 {
			t.Fatalf("the faults answered %d produces and %d listings, want 1 and some", refused.Hits(), listing.Hits())
		}
		if err := run.stop(); err != nil {
			t.Errorf("Run = %v after a cancel", err)
		}
		checking.Store(true)
		h.expectCommitted(t, map[string]int{"sim.t0": 0, simDLQ: 1})
	})
}

// A stop while a commit waits for Kafka ends within the shutdown timeout. The commit's context
// did not end with the stop (a commit cut short has an unknown outcome), and franz-go waits for
// the answer to the checkpoint's produce even once its context ended: a stop during a commit
// whose answers Kafka held kept Run past its shutdown timeout, for as long as Kafka held them
// (the virtual-time simulation's exactly-once seeds 11305, 18800 and 24212, past its bound of
// the shutdown timeout and 30 s). Here Kafka answers no produce from the commit's checkpoint on,
// and the stop comes then: Run returns within the shutdown timeout, the row not confirmed.
func TestExactlyOnceStopDuringAHeldCommitEndsWithinTheShutdownTimeout(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		h.sc.shutdown = 5 * time.Second
		r, run := runStreaming(t, h)
		checkpoints := topicID(t, h, kafkatxn.DefaultCheckpointTopic) // produce requests name topics by id
		var canceledAt atomic.Pointer[time.Time]
		h.kafka.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
			h.kafka.KeepControl()
			if canceledAt.Load() != nil {
				return nil, nil, true // held: no answer
			}
			for _, tp := range req.(*kmsg.ProduceRequest).Topics {
				if tp.TopicID == checkpoints {
					now := time.Now()
					canceledAt.Store(&now)
					run.cancel() // the stop, while the commit's checkpoint is at the broker
					return nil, nil, true
				}
			}
			return nil, nil, false
		})
		before := r.stream.Flushed()
		h.commit(run.ctx, oneRow(1), 0)
		var err error
		select {
		case err = <-run.done:
		case <-time.After(10 * time.Minute):
			t.Fatal("Run did not return within 10 minutes of the stop")
		}
		if err == nil {
			t.Error("Run = nil, want the commit cut short by the stop (its outcome unknown: the restart reads the checkpoint)")
		}
		at := canceledAt.Load()
		if at == nil {
			t.Fatal("no commit was sent")
		}
		if d := time.Since(*at); d > h.sc.shutdown {
			t.Errorf("Run returned %s after the stop, past the shutdown timeout %s: it waited for the commit's held answer", d, h.sc.shutdown)
		}
		if c := r.stream.Flushed(); c != before {
			t.Errorf("the relay confirmed %s (from %s) although the commit's outcome is unknown", c, before)
		}
	})
}

// topicID is the id the harness's cluster gave topic.
func topicID(t *testing.T, h *harness, topic string) [16]byte {
	t.Helper()
	cl, err := kgo.NewClient(append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(context.Background(), topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	return td[topic].ID
}

// A quiet stream's transaction is committed as soon as the pipeline has decoded it, not at the
// end of --transaction-interval: here the interval is 10 s, and a read_committed reader has
// the row, and the slot its position, within a second of the commit in PostgreSQL. A relay that
// held each Kafka transaction open for the interval kept a consumer waiting half of it on average.
func TestExactlyOnceQuietStreamCommitsWithoutWaitingForTheInterval(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		h.tune = func(c *Config) {
			c.ExactlyOnce = &ExactlyOnce{Interval: 10 * time.Second, TransactionTimeout: time.Minute}
		}
		commit := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Observe: true, Count: -1, When: commits})
		r, run := runStreaming(t, h)
		for i := range 3 {
			h.commit(run.ctx, oneRow(int64(i+1)), 0)
			end := h.committed[i].txn.EndLSN
			took := waitFor(t, 30*time.Second, "the relay to confirm past the row", func() bool { return r.stream.Flushed() >= end })
			if took > time.Second {
				t.Errorf("row %d: confirmed %s after its commit, with the Kafka transaction interval at 10 s: want it committed once decoded", i+1, took)
			}
			if n := h.committedCount(t, "sim.t0"); n != i+1 || commit.Hits() != i+1 {
				t.Errorf("after row %d: a read_committed reader sees %d records, Kafka took %d commits: want %d of each", i+1, n, commit.Hits(), i+1)
			}
		}
		if err := run.stop(); err != nil {
			t.Errorf("Run = %v after a cancel", err)
		}
	})
}

// A relay caught up inside a PostgreSQL transaction (the walsender pauses in the middle of one)
// does not commit there: only the split rules (twice the interval, the record bound) may end a
// Kafka transaction inside a PostgreSQL one. Here the interval is 10 s and the pause 1 s: one
// commit, after the transaction's end, whose checkpoint is past it with no split.
func TestExactlyOnceCaughtUpInsideATransactionWaitsForItsEnd(t *testing.T) {
	onExactlyOnceHarness(t, func(t *testing.T, h *harness) {
		h.tune = func(c *Config) {
			c.ExactlyOnce = &ExactlyOnce{Interval: 10 * time.Second, TransactionTimeout: time.Minute}
		}
		const rows, before = 300, 100
		var paused atomic.Bool
		h.srv.Script = func(e simwal.Event) simwal.Action {
			// The session's XLogData: Begin, Relation, then the rows.
			if e.Sent == 2+before && !paused.Swap(true) {
				return simwal.Action{Pause: time.Second}
			}
			return simwal.Action{}
		}
		commit := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Observe: true, Count: -1, When: commits})
		r, run := runStreaming(t, h)
		h.commit(run.ctx, rowsOfOneTxn(rows), 0)
		end := h.committed[0].txn.EndLSN
		waitFor(t, 30*time.Second, "the relay to confirm past the transaction", func() bool { return r.stream.Flushed() >= end })
		run.stopClean(t, h)
		cps := h.committedCheckpoints(t)
		if !paused.Load() || commit.Hits() != 1 || len(cps) != 1 || cps[0].Split != (kafkatxn.Split{}) || cps[0].Position < end {
			t.Errorf("paused %v; %d commits, checkpoints %+v: want one, at %s or later, no split", paused.Load(), commit.Hits(), cps, end)
		}
	})
}

// rowsOfOneTxn is one transaction of n rows of key k on sim.t0, outbox ids 1 to n.
func rowsOfOneTxn(n int) []simTxnSpec {
	spec := simTxnSpec{}
	for i := range n {
		spec.rows = append(spec.rows, simRow{id: int64(i + 1), key: "k", topic: "sim.t0", payload: `{"n":1}`})
	}
	return []simTxnSpec{spec}
}

// committedCheckpoints is the checkpoints a read_committed reader sees on the checkpoint topic,
// in order.
func (h *harness) committedCheckpoints(t *testing.T) []kafkatxn.Checkpoint {
	t.Helper()
	var cps []kafkatxn.Checkpoint
	err := kafkatxn.ReadCommitted(context.Background(), append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...)), kafkatxn.DefaultCheckpointTopic,
		func(rec *kgo.Record) {
			var cp kafkatxn.Checkpoint
			if err := cp.UnmarshalBinary(rec.Value); err != nil {
				t.Errorf("checkpoint record at offset %d: %v", rec.Offset, err)
			}
			cps = append(cps, cp)
		})
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

// committedCount is how many records a read_committed reader sees on topic.
func (h *harness) committedCount(t *testing.T, topic string) int {
	t.Helper()
	n := 0
	opts := append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...))
	if err := kafkatxn.ReadCommitted(context.Background(), opts, topic, func(*kgo.Record) { n++ }); err != nil {
		t.Fatal(err)
	}
	return n
}

// expectCommitted fails t unless a read_committed reader sees want[topic] records on each topic.
func (h *harness) expectCommitted(t *testing.T, want map[string]int) {
	t.Helper()
	for topic, w := range want {
		if n := h.committedCount(t, topic); n != w {
			t.Errorf("a read_committed reader sees %d records on %s, want %d", n, topic, w)
		}
	}
}
