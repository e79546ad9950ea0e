package relay

import (
	"context"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/retry"
)

// Broker-outage handling (DESIGN.md, "Broker outage"). The producer itself retries a
// retriable failure forever (no per-record budget), one request per partition batch, and
// Produce blocks once its buffers are full, which stops reading the slot; the stream keeps
// answering keepalives meanwhile and the confirmed position holds, because nothing after the
// first unacknowledged record is confirmed. watchKafka only makes the outage visible: when
// records are in flight and no acknowledgement has arrived for kafkaStallAfter, it logs the
// outage once, then probes the cluster once per cycle (a single metadata request), with the
// cycle doubling from kafkaProbeMin to kafkaProbeMax, and logs each probe; when
// acknowledgements resume it logs the end of the outage and its length.
const (
	kafkaStallAfter = 5 * time.Second
	kafkaProbeMin   = time.Second
	kafkaProbeMax   = 30 * time.Second
	kafkaProbeWait  = 3 * time.Second
)

// watchKafka runs on its own goroutine until ctx ends. It never fails the relay.
func (r *Relay) watchKafka(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	acked := func() int64 { return r.stats.Published.Load() + r.stats.DeadLettered.Load() }
	last, lastAt := acked(), time.Now()
	var down time.Time // zero while Kafka acknowledges
	var probes int
	var nextProbe time.Time
	stuckLogged := map[topicPartition]time.Time{} // partitions reported stuck, and when last
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			if down.IsZero() {
				// Not (yet) an outage of the whole cluster: partitions may be stuck on their own.
				r.watchPartitions(now, lastAt, stuckLogged)
			}
			if n := acked(); n != last || r.sink.Buffered() == 0 {
				last, lastAt = n, now
				if !down.IsZero() {
					r.log.Info("Kafka is acknowledging again: publishing the backlog in order",
						"outage", now.Sub(down).Round(time.Millisecond), "probes", probes, "in_flight", r.sink.Buffered(), "confirmed", r.Confirmed())
					down = time.Time{}
				}
				continue
			}
			if down.IsZero() {
				if now.Sub(lastAt) < kafkaStallAfter {
					continue
				}
				down, probes, nextProbe = lastAt, 0, now
				r.stats.KafkaOutages.Add(1)
				r.log.Warn("Kafka is not acknowledging: holding the confirmed position, retrying without a per-record budget, probing once per cycle",
					"since", lastAt.Format(time.RFC3339), "in_flight", r.sink.Buffered(), "confirmed", r.Confirmed())
			}
			if now.Before(nextProbe) {
				continue
			}
			probes++
			cycle := retry.Backoff{Min: kafkaProbeMin, Max: kafkaProbeMax}.Delay(probes - 1)
			r.stats.KafkaProbes.Add(1)
			started := now
			pctx, cancel := context.WithTimeout(ctx, kafkaProbeWait)
			err := r.sink.Client().Ping(pctx)
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			nextProbe = started.Add(cycle)
			if err != nil {
				r.log.Warn("Kafka unavailable: probe failed", "probe", probes, "outage", time.Since(down).Round(time.Second),
					"next_probe_in", cycle, "in_flight", r.sink.Buffered(), "confirmed", r.Confirmed(), "cause", err)
			} else {
				r.log.Warn("Kafka answers metadata but has not acknowledged the records in flight yet", "probe", probes,
					"outage", time.Since(down).Round(time.Second), "next_probe_in", cycle, "in_flight", r.sink.Buffered())
			}
		}
	}
}

// watchPartitions reports partitions that hold records without progress for kafkaStallAfter
// while others were acknowledged more than a second after they stalled (a partition whose
// leader is gone: the relay-wide watch above is reset by the other partitions'
// acknowledgements; when every partition stops at once, that watch reports it alone): once when
// it starts, again every heldLogEvery, and when it ends. lastAck is the last acknowledgement.
func (r *Relay) watchPartitions(now, lastAck time.Time, logged map[topicPartition]time.Time) {
	stuck := r.parts.stuck(kafkaStallAfter)
	seen := make(map[topicPartition]bool, len(stuck))
	for _, p := range stuck {
		seen[p.topicPartition] = true
		if _, ok := logged[p.topicPartition]; !ok && lastAck.Sub(p.since) <= time.Second {
			continue // the others stopped with it: an outage of the cluster, not of this partition
		}
		last, ok := logged[p.topicPartition]
		if ok && now.Sub(last) < heldLogEvery {
			continue
		}
		logged[p.topicPartition] = now
		txns, _ := r.track.pending()
		r.log.Warn("Kafka is not acknowledging a partition: the confirmed position holds at its oldest record; the producer retries it without a per-record budget",
			"topic", p.topic, "partition", p.partition, "since", p.since.UTC().Format(time.RFC3339), "records", p.buffered,
			"transactions_waiting", txns, "confirmed", r.Confirmed())
	}
	for tp := range logged {
		if !seen[tp] {
			delete(logged, tp)
			r.log.Info("Kafka is acknowledging the partition again", "topic", tp.topic, "partition", tp.partition)
		}
	}
}
