package relay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/replication"
)

// One partition whose leader is gone retries its records forever while the other partitions
// acknowledge. The relay-wide outage watch, reset by those acknowledgements, logged nothing, and
// every later transaction waited in the tracker behind the held record. Now the tracker stops at
// twice MaxBufferedRecords (reading pauses), the partition is named in the log, and once it
// acknowledges again everything is confirmed.
func TestSimPartitionDownPausesReadingAndSaysWhich(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, r, ctx, down := partitionDown(t, 20)
		logw := h.logw
		var txns []simTxnSpec
		for i := range 300 {
			txns = append(txns, simTxnSpec{rows: []simRow{{id: int64(i + 1), key: fmt.Sprintf("k%d", i%7), topic: "sim.t0", payload: `{"n":1}`}}})
		}
		go h.commit(ctx, txns, 0)
		defer func() {
			if t.Failed() {
				t.Log(logw.String())
			}
		}()
		waitFor(t, 20*time.Second, "the partition named in the log", func() bool {
			return strings.Contains(logw.String(), "reading paused")
		})
		if n := r.track.inFlight(); n > r.maxTxns {
			t.Errorf("%d transactions tracked, want at most %d", n, r.maxTxns)
		}
		if r.stats.Published.Load() == 0 {
			t.Errorf("nothing acknowledged on the other partition: not a partial outage")
		}
		out := logw.String()
		for _, want := range []string{"waiting_for=\"Kafka to acknowledge topic sim.t0 partition 0"} {
			if !strings.Contains(out, want) {
				t.Errorf("the log does not say %q:\n%s", want, out)
			}
		}
		down.Remove()
		end := h.srv.WALEnd()
		waitFor(t, 30*time.Second, "everything confirmed once the partition is back", func() bool { return h.srv.Confirmed() >= end })
		// Once reading paused nothing is acknowledged at all, so the relay-wide watch may report the
		// end of the outage instead of the partition's.
		waitFor(t, 10*time.Second, "the log to say that reading resumed", func() bool {
			return strings.Contains(logw.String(), "reading resumed")
		})
	})
}

// partitionDown starts a relay on a topic of two partitions, MaxBufferedRecords maxRecords, and
// takes partition 0's leader away (every produce to it fails retriably) until down is removed.
func partitionDown(t *testing.T, maxRecords int) (*harness, *Relay, context.Context, *kfake.FaultHandle) {
	h := newFixedHarness(t, &schedule{topics: []simTopic{{name: "sim.t0", partitions: 2}}, maxRecords: maxRecords, maxBytes: 1 << 20,
		buffer: 64, statusInterval: 20 * time.Millisecond, receiveTimeout: 2 * time.Second, shutdown: 2 * time.Second})
	r, ctx := h.startRelay(t)
	down := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "sim.t0", Partitions: []int32{0}, Err: kerr.NotLeaderForPartition, Count: -1})
	return h, r, ctx, down
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The same partition outage while reading has not paused (the other partition still takes
// records): the outage watch, reset by the other partition's acknowledgements, names the
// partition once it held its records for 5 s.
func TestSimPartitionDownIsLoggedWhileOthersAcknowledge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, _, ctx, down := partitionDown(t, 1000)
		logw := h.logw
		defer down.Remove()
		var txns []simTxnSpec
		for i := range 500 {
			txns = append(txns, simTxnSpec{rows: []simRow{{id: int64(i + 1), key: fmt.Sprintf("k%d", i%7), topic: "sim.t0", payload: `{"n":1}`}}})
		}
		cctx, ccancel := context.WithCancel(ctx)
		defer ccancel()
		go h.commit(cctx, txns, 20*time.Millisecond)
		waitFor(t, 20*time.Second, "the partition named by the outage watch", func() bool {
			return strings.Contains(logw.String(), "Kafka is not acknowledging a partition")
		})
		if out := logw.String(); !strings.Contains(out, "topic=sim.t0 partition=0") || strings.Contains(out, "partition=1 since") {
			t.Errorf("the log does not name partition 0 alone:\n%s", out)
		}
	})
}

// A relay that lost the slot (its session ended while Kafka held its records, and another
// process took the slot) kept retrying its buffered records: once Kafka took them again they
// landed after the new holder's records of the same key. Now the end of the session aborts
// what the producer buffers and forgets the transactions: the records of the key that land
// after the new holder's are only those this relay produces once it holds the slot again.
func TestSimLostSlotAbortsBufferedRecords(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := fixedHarness(t, 20*time.Millisecond)
		r, ctx := h.startRelay(t)
		// The relay's produce requests (acks=all, idempotent) fail retriably; the new holder's
		// (acks=1, below) go through.
		down := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotLeaderForPartition, Count: -1,
			When: func(req kmsg.Request) bool { return req.(*kmsg.ProduceRequest).Acks == -1 }})
		var txns []simTxnSpec
		for i := range 5 {
			txns = append(txns, oneRow(int64(i+1))...)
		}
		h.commit(ctx, txns, 0)
		waitFor(t, 10*time.Second, "the relay's records buffered", func() bool { return r.sink.Buffered() == 5 })

		h.srv.HoldSlot(4242) // another relay takes the slot the moment this one's session ends
		h.srv.DropAll()
		waitFor(t, 10*time.Second, "the relay to wait as a standby", func() bool { return r.stream.State() == replication.StateStandby })
		newHolder := mustClient(append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())...)
		defer newHolder.Close()
		if err := newHolder.ProduceSync(ctx, &kgo.Record{Topic: "sim.t0", Key: []byte("k"), Value: []byte(`{"from":"the new holder"}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		down.Remove()
		// Whatever the relay still buffered is delivered or aborted within a few retries.
		waitFor(t, 10*time.Second, "nothing buffered", func() bool { return r.sink.Buffered() == 0 })
		time.Sleep(200 * time.Millisecond)
		after := recordsAfterNewHolder(t, h)
		if after != 0 {
			t.Errorf("%d records of the relay that lost the slot landed after the new holder's record of the key", after)
		}
		// Back to the relay: it replays from the slot and delivers everything.
		h.srv.HoldSlot(0)
		end := h.committed[len(h.committed)-1].txn.EndLSN
		waitFor(t, 20*time.Second, "the slot confirmed by the relay again", func() bool { return h.srv.Confirmed() >= end })
	})
}

// recordsAfterNewHolder counts the relay's records (they carry outbox-id) after the first
// record without one (the new holder's) on sim.t0.
func recordsAfterNewHolder(t *testing.T, h *harness) int {
	t.Helper()
	cl := mustClient(append(h.netOpts(), kgo.SeedBrokers(h.kafka.ListenAddrs()...), kgo.ConsumeTopics("sim.t0"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	seen, after := false, 0
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		n := 0
		fs.EachRecord(func(rec *kgo.Record) {
			n++
			relays := false
			for _, hd := range rec.Headers {
				relays = relays || hd.Key == "outbox-id"
			}
			switch {
			case !relays:
				seen = true
			case seen:
				after++
			}
		})
		if n == 0 && seen {
			break
		}
	}
	return after
}
