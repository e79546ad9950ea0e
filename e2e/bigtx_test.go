package e2e

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// One transaction of 1,000,000 outbox rows is published completely while the relay's
// resident memory stays under 200 MB: the decoder streams and the producer's buffer limits
// push back, nothing holds a whole transaction.
func TestMillionRowTransactionInBoundedMemory(t *testing.T) {
	const rows = 1_000_000
	const limit = 200 << 20
	// Without the race detector: its shadow memory would be measured, not the relay's.
	e := testenv.NewRelayEnv(t, false)

	ctx := context.Background()
	var first, last int64
	err := e.F.Pool.QueryRow(ctx, `WITH ins AS (
		INSERT INTO `+e.F.Table+` (aggregate_id, topic, payload, event_type)
		SELECT 'agg-' || (g % 1000), $1, jsonb_build_object('n', g, 'pad', repeat('p', 64)), 'bulk.loaded'
		FROM generate_series(1, $2::int) g RETURNING id)
		SELECT min(id), max(id) FROM ins`, e.F.Topic, rows).Scan(&first, &last)
	if err != nil {
		t.Fatal(err)
	}
	if last-first+1 != rows {
		t.Fatalf("ids %d..%d are not contiguous", first, last)
	}

	// Count distinct ids in a bitmap rather than keeping a million records.
	seen := make([]uint64, (rows+63)/64)
	var distinct atomic.Int64
	cl := testenv.Kafka(t, kgo.ConsumeTopics(e.F.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			cl.PollFetches(cctx).EachRecord(func(r *kgo.Record) {
				id, err := strconv.ParseInt(testenv.Header(r, "outbox-id"), 10, 64)
				if err != nil || id < first || id > last {
					return
				}
				i := id - first
				if seen[i/64]&(1<<(i%64)) == 0 {
					seen[i/64] |= 1 << (i % 64)
					distinct.Add(1)
				}
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	began := time.Now()
	p := e.Start(t, nil)
	var peak int64
	testenv.Eventually(t, 10*time.Minute, "a million records on the topic", func() bool {
		if rss, err := testenv.RSSPeak(p.PID()); err == nil {
			peak = rss
		}
		return distinct.Load() == rows
	})
	elapsed := time.Since(began)
	if rss, err := testenv.RSSPeak(p.PID()); err == nil {
		peak = rss
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("relay exit %d", code)
	}
	t.Logf("1,000,000-row transaction: published in %s (%.0f rows/s), relay peak RSS %.1f MB",
		elapsed.Round(time.Millisecond), rows/elapsed.Seconds(), float64(peak)/(1<<20))
	if peak == 0 || peak > limit {
		t.Errorf("relay peak RSS %d bytes, limit %d", peak, limit)
	}
	if !strings.Contains(p.Output(), "stopped") {
		t.Errorf("no clean stop in the output")
	}
}
