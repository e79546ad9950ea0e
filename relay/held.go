package relay

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Holding a record. The confirmed position cannot pass a record that is neither delivered nor
// parked: a dead letter that neither the dead-letter topic nor the table takes, a record retried
// forever (a partition whose leader is gone). Reading goes on behind it, and every later
// transaction waits in the tracker until it is resolved; without a bound, that queue grows with
// the WAL. So the tracker holds at most maxTxns transactions (twice the producer's
// MaxBufferedRecords, so that the producer's own buffer is what paces a backlog): at a Begin with the tracker full, the pipeline waits, which fills the
// channel and pauses reading as the producer's full buffer does, while the stream keeps sending
// status updates (DESIGN.md, "Backpressure"). While it waits it says what holds the position,
// since when, and how many transactions wait behind it, once the pause lasted heldLogAfter, and
// again every heldLogEvery.

// heldLogAfter is how long the pipeline waits before it says so: a backlog that Kafka takes
// slowly also fills the tracker now and then, for moments. heldLogEvery is how often a paused
// pipeline repeats what it waits for.
var heldLogAfter, heldLogEvery = kafkaStallAfter, time.Minute

// waitForRoom blocks until the tracker has room for another transaction. It returns false when
// ctx ends or the tracker failed first: the pipeline then stops.
func (r *Relay) waitForRoom(ctx context.Context) bool {
	began := time.Now()
	say := time.NewTimer(heldLogAfter)
	defer say.Stop()
	var tick <-chan time.Time
	for !r.track.hasRoom(r.maxTxns) {
		select {
		case <-ctx.Done():
			return false
		case <-r.track.failCh:
			return false
		case <-r.track.room:
		case <-say.C:
			r.logHeld("reading paused: the confirmed position is held by an unresolved record and the transactions behind it reached the limit", began)
			t := time.NewTicker(heldLogEvery)
			defer t.Stop() //nolint:gocritic // say fires once: one ticker per pause
			tick = t.C
		case <-tick:
			r.logHeld("reading still paused: the confirmed position is still held", began)
		}
	}
	if tick != nil {
		r.log.Info("reading resumed: the record that held the position is resolved", "paused", time.Since(began).Round(time.Millisecond),
			"confirmed", r.Confirmed())
	}
	return true
}

func (r *Relay) logHeld(msg string, began time.Time) {
	txns, oldest := r.track.pending()
	r.log.Warn(msg, "waiting_for", r.holding(), "oldest_commit", oldest.UTC().Format(time.RFC3339Nano),
		"transactions_waiting", max(txns-1, 0), "max_transactions", r.maxTxns, "paused_for", time.Since(began).Round(time.Second),
		"confirmed", r.Confirmed())
}

// holding says what the oldest unresolved records wait for: the dead-letter table, the
// dead-letter topic, or Kafka partitions that stopped acknowledging.
func (r *Relay) holding() string {
	var parts []string
	if n := r.table.len(); n > 0 {
		parts = append(parts, fmt.Sprintf("the dead-letter table %s to take %d letters (it refuses them; see its errors above)", r.cfg.DeadLetterTable, n))
	}
	if n := r.dlq.len(); n > 0 {
		parts = append(parts, fmt.Sprintf("the dead-letter topic %s to take %d queued letters", r.cfg.DLQTopic, n))
	}
	// The partitions holding records, the longest without progress first: the oldest record
	// waits on one of them.
	if held := r.parts.stuck(0); len(held) > 0 {
		more := ""
		if len(held) > 3 {
			held, more = held[:3], fmt.Sprintf(" and %d more partitions", len(held)-3)
		}
		parts = append(parts, "Kafka to acknowledge "+describeStuck(held)+more)
	}
	if len(parts) == 0 {
		return "the oldest transaction's records"
	}
	return strings.Join(parts, "; ")
}
