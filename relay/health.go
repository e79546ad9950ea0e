package relay

import (
	"context"
	"fmt"

	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/replication"
)

// MetricsSnapshot implements metrics.RelaySource: the counters, what is in flight and the
// replication state, read without stopping the pipeline. Safe from any goroutine.
func (r *Relay) MetricsSnapshot() metrics.RelaySnapshot {
	txns, oldest := r.track.pending()
	return metrics.RelaySnapshot{
		Published:       r.stats.Published.Load(),
		PublishedBytes:  r.stats.Bytes.Load(),
		DeadLettered:    r.stats.DeadLettered.Load(),
		BadRows:         r.stats.BadRows.Load(),
		Transactions:    r.stats.Transactions.Load(),
		RecordsInFlight: r.sink.Buffered(),
		TxnsInFlight:    int64(txns),
		Confirmed:       r.stream.Flushed(),
		OldestUnacked:   oldest,
		State:           r.stream.State().String(),
		Reconnects:      r.stream.Reconnects(),
		ParkedInTable:   r.stats.ParkedInTable.Load(),
		KafkaOutages:    r.stats.KafkaOutages.Load(),
		KafkaProbes:     r.stats.KafkaProbes.Load(),
		KeyOrderAtRisk:  r.stats.KeyOrderAtRisk.Load(),
	}
}

// Ready reports nil when the relay holds the slot (the replication stream is streaming) and
// Kafka answers a metadata request within ctx; otherwise what is missing. A standby is not
// ready: it waits for the slot.
func (r *Relay) Ready(ctx context.Context) error {
	if st := r.stream.State(); st != replication.StateStreaming {
		return fmt.Errorf("replication is %s, not streaming from the slot", st)
	}
	if err := r.sink.Client().Ping(ctx); err != nil {
		return fmt.Errorf("kafka unreachable: %w", err)
	}
	return nil
}
