package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
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
	if testing.Short() {
		t.Skip("a partition down for over 5 s")
	}
	oldAfter := heldLogAfter
	heldLogAfter = 200 * time.Millisecond
	t.Cleanup(func() { heldLogAfter = oldAfter })
	sc := &schedule{topics: []simTopic{{name: "sim.t0", partitions: 2}}, maxRecords: 20, maxBytes: 1 << 20,
		buffer: 64, statusInterval: 20 * time.Millisecond, receiveTimeout: 2 * time.Second, shutdown: 2 * time.Second}
	logw := &lockedBuf{}
	h := &harness{t: t, sc: sc, logw: logw, store: &tableStore{}, log: slog.New(slog.NewTextHandler(logw, nil))}
	if err := h.setup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	r, _ := h.newRelay(0)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v", err)
		}
		h.failOnViolations()
	}()
	waitFor(t, 10*time.Second, "streaming", func() bool { return r.stream.State() == replication.StateStreaming })
	down := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "sim.t0", Partitions: []int32{0}, Err: kerr.NotLeaderForPartition, Count: -1})
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
		return strings.Contains(logw.String(), "Kafka is not acknowledging a partition") && strings.Contains(logw.String(), "reading paused")
	})
	if n := r.track.inFlight(); n > r.maxTxns {
		t.Errorf("%d transactions tracked, want at most %d", n, r.maxTxns)
	}
	if r.stats.Published.Load() == 0 {
		t.Errorf("nothing acknowledged on the other partition: not a partial outage")
	}
	out := logw.String()
	for _, want := range []string{"topic=sim.t0 partition=0", "waiting_for=\"Kafka to acknowledge topic sim.t0 partition 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
	down.Remove()
	end := h.srv.WALEnd()
	waitFor(t, 30*time.Second, "everything confirmed once the partition is back", func() bool { return h.srv.Confirmed() >= end })
	// Once reading paused nothing is acknowledged at all, so the relay-wide watch may report the
	// end of the outage instead of the partition's.
	waitFor(t, 10*time.Second, "the log to say that reading resumed and the partition acknowledges again", func() bool {
		out := logw.String()
		return strings.Contains(out, "reading resumed") &&
			(strings.Contains(out, "acknowledging the partition again") || strings.Contains(out, "Kafka is acknowledging again"))
	})
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
