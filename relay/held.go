package relay

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// heldLogAfter is how long the pipeline waits before it says so: a backlog that Kafka takes
// slowly also fills the tracker now and then, for moments. heldLogEvery is how often a paused
// pipeline repeats what it waits for.
var heldLogAfter, heldLogEvery = kafkaStallAfter, time.Minute

// waitForRoom blocks until the tracker has room for another transaction. It returns false when
// ctx ends or the tracker failed first: the pipeline then stops. The position cannot pass a
// record neither delivered nor parked (a letter no destination takes, a record retried for
// ever), and every later transaction waits in the tracker meanwhile; so the tracker holds at
// most maxTxns (twice the producer's MaxBufferedRecords: the producer's buffer paces a backlog),
// and a Begin beyond waits here, which pauses reading as a full producer buffer does. It says
// what holds the position, since when and how many transactions wait, after heldLogAfter and
// every heldLogEvery. (DESIGN.md, "Backpressure")
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
