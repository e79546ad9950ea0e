package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/sink"
)

// letterKey is a letter's original topic and key.
type letterKey struct{ topic, key string }

// letterKeyOf is the original topic (the dlq-original-topic header sink.DeadLetter set) and key
// of the letter r.
func letterKeyOf(r *kgo.Record) letterKey {
	return letterKey{topic: string(sink.Header(r, sink.HeaderDLQTopic)), key: string(r.Key)}
}

// holdsKey reports whether a letter of rec's topic and key is held. A record produced while
// franz-go fails the refused record's partition buffer, before the refused record's promise
// queued its letter, is not held; franz-go fails every record already buffered for that
// partition with the refused one, so only a record produced in that moment can pass it.
func (b *letterBudget) holdsKey(rec *kgo.Record) bool {
	if b.ordered.Load() == 0 {
		return false // no letter held: one atomic load per record
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.keys[letterKey{topic: rec.Topic, key: string(rec.Key)}]) > 0
}

// waitKey returns once no letter of rec's topic and key is held, or false when ctx ends or lost
// reports the session lost first (rec is not produced; the pipeline produces nothing after it).
// Delivered ahead of a letter not parked yet, rec would outlive a stop, failure or crash that
// forgot the letter, and the refused record's replay would land after it: its key out of commit
// order, nothing dead-lettered to say why. Reading pauses behind it (said, with the topic, key
// and id, rec's outbox id, after heldLogAfter and every heldLogEvery). A bad row holds nothing:
// it never reaches its topic. (DESIGN.md, "A key's later records wait for its dead letter")
func (b *letterBudget) waitKey(ctx context.Context, rec *kgo.Record, id string, log *slog.Logger, lost func() bool) bool {
	if !b.holdsKey(rec) {
		return true
	}
	began := time.Now()
	said := false
	held := func() bool { return b.holdsKey(rec) }
	if !b.pause(ctx, held, lost, heldLogAfter, func(n int, paused time.Duration) {
		said = true
		if n == 0 {
			log.Warn("reading paused: a dead letter of this record's topic and key is not parked yet, and the key's later records wait for it, in order",
				"topic", rec.Topic, "key", string(rec.Key), "outbox_id", id, "paused_for", paused.Round(time.Second))
			return
		}
		log.Warn("reading still paused: the dead letter of the key is not parked yet", "topic", rec.Topic, "key", string(rec.Key), "paused_for", paused.Round(time.Second))
	}) {
		return false
	}
	if said {
		log.Info("reading resumed: the key's dead letter is parked", "topic", rec.Topic, "key", string(rec.Key), "paused", time.Since(began).Round(time.Millisecond))
	}
	return true
}

// passed returns the letters of rec's topic and key that rec, acknowledged on its topic,
// passed, oldest first: those not parked yet whose records were produced before rec (a lower
// seq).
func (b *letterBudget) passed(rec *kgo.Record, seq uint64) []*kgo.Record {
	if b.ordered.Load() == 0 {
		return nil // no letter held: one atomic load per acknowledgement
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var passed []*kgo.Record
	for _, h := range b.keys[letterKey{topic: rec.Topic, key: string(rec.Key)}] {
		if h.seq < seq {
			passed = append(passed, h.rec)
		}
	}
	return passed
}

// passedLetters says that rec (outbox id id) was acknowledged ahead of letters, the dead
// letters of earlier records of its topic and key: the key's order rests on them now
// (DESIGN.md, "A key's later records wait for its dead letter").
func (r *Relay) passedLetters(rec *kgo.Record, id string, letters []*kgo.Record) {
	r.stats.KeyOrderAtRisk.Add(1)
	r.log.Error("a record was acknowledged ahead of the dead letter of an earlier record of its key: franz-go failed the earlier "+
		"record (its batch refused, or the record too large for a batch) and took this one before the relay heard of the failure; "+
		"the key stays in order only if that letter is parked before the relay stops, or the earlier record is refused again "+
		"on the replay (a crash or a shutdown timeout before the letter is parked, and a refusal that ended, put it after this one)",
		"topic", rec.Topic, "key", string(rec.Key), "outbox_id", id,
		"letter_outbox_id", string(sink.Header(letters[0], sink.HeaderOutboxID)), "letters", len(letters))
	if r.onPassed != nil {
		r.onPassed(rec, letters)
	}
}
