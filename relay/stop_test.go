package relay

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/replication"
)

// A clean stop flushes what the producer buffers. franz-go fails a buffered record whose Produce
// context ended, and the pipeline's was Run's: a stop failed every record not yet in flight
// (replayed on the next start) instead of letting Kafka take it within the shutdown timeout.
func TestCleanStopFlushesBufferedRecords(t *testing.T) {
	t.Parallel()
	h := fixedHarness(t, 20*time.Millisecond)
	r, _ := h.newRelay(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	waitFor(t, 10*time.Second, "streaming", func() bool { return r.stream.State() == replication.StateStreaming })
	// Kafka answers each produce request 100 ms late: records queue behind the one in flight.
	slow := h.installFault(context.Background(), simFault{kind: faultSlow, count: 1 << 20, dur: 400 * time.Millisecond})
	defer slow()
	var txns []simTxnSpec
	for i := range 20 {
		txns = append(txns, oneRow(int64(i+1))...)
	}
	h.commit(ctx, txns, 0)
	waitFor(t, 10*time.Second, "records buffered behind the one in flight", func() bool { return r.sink.Buffered() >= 10 })
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v after a cancel", err)
	}
	if c, end := h.srv.Confirmed(), h.committed[len(h.committed)-1].txn.EndLSN; c < end {
		t.Errorf("a clean stop left the slot at %s, short of %s: the records buffered when it began were failed, not flushed (published %d of 20)",
			c, end, r.stats.Published.Load())
	}
	h.failOnViolations()
}

// A record that fails for good stops the relay, and nothing produced after it is sent. franz-go
// fails the failed record's partition buffer with it, and the space that frees woke the
// pipeline's Produce call waiting for it, whose record franz-go sent at once: a later record of
// the key on the topic ahead of the failed ones, whose replay then filled the gap out of order
// (seed 727 of the virtual-time simulation).
func TestFailedRecordStopsTheRecordWaitingForBufferSpace(t *testing.T) {
	t.Parallel()
	h := fixedHarness(t, 20*time.Millisecond)
	h.sc.maxRecords = 2
	r, _ := h.newRelay(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	waitFor(t, 10*time.Second, "streaming", func() bool { return r.stream.State() == replication.StateStreaming })

	down := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotLeaderForPartition, Count: -1})
	var txns []simTxnSpec
	for i := range 3 {
		txns = append(txns, oneRow(int64(i+1))...)
	}
	h.commit(ctx, txns, 0)
	waitFor(t, 10*time.Second, "the third row waiting for buffer space", func() bool { return r.sink.Buffered() == 3 && r.lost.producing.Load() }) // two buffered, one blocked
	h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.UnknownServerError, Count: 1})
	down.Remove() // the next try of the two buffered rows fails for good; Kafka takes what comes after
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("Run returned nil after a record failed for good")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20s of a record failing for good")
	}
	adm := kadm.NewClient(mustClient(kgo.SeedBrokers(h.kafka.ListenAddrs()...)))
	defer adm.Close()
	ends, err := adm.ListEndOffsets(context.Background(), "sim.t0")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("sim.t0", 0); o.Offset != 0 {
		t.Errorf("%d records landed on sim.t0 after the one before them failed for good: the replay fills that gap out of order", o.Offset)
	}
}
