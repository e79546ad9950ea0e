package relay

import (
	"context"
	"testing"
	"time"

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
