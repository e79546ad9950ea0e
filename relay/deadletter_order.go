package relay

import (
	"context"
	"log/slog"
	"time"
)

// letterKey is a letter's original topic and key: those of its record's event (outbox.Event's
// Topic and AggregateID, the record's topic and key).
type letterKey struct{ topic, key string }

// holdsKey reports whether a letter of topic and key k is held. A record produced while
// franz-go fails the refused record's partition buffer, before the refused record's promise
// queued its letter, is not held; franz-go fails every record already buffered for that
// partition with the refused one, so only a record produced in that moment can pass it.
func (b *letterBudget) holdsKey(k letterKey) bool {
	if b.ordered.Load() == 0 {
		return false // no letter held: one atomic load per record
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.keys[k]) > 0
}

// waitKey returns once no letter of topic and key k is held, or false when ctx ends or lost
// reports the session lost first (the record is not produced; the pipeline produces nothing
// after it). Delivered ahead of a letter not parked yet, the record would outlive a stop,
// failure or crash that forgot the letter, and the refused record's replay would land after
// it: its key out of commit order, nothing dead-lettered to say why. Reading pauses behind it
// (said, with the topic, key and id, the record's outbox id, after heldLogAfter and every
// heldLogEvery). A bad row holds nothing: it never reaches its topic. (DESIGN.md, "A key's
// later records wait for its dead letter")
func (b *letterBudget) waitKey(ctx context.Context, k letterKey, id string, log *slog.Logger, lost func() bool) bool {
	if !b.holdsKey(k) {
		return true
	}
	began := time.Now()
	said := false
	held := func() bool { return b.holdsKey(k) }
	if !b.pause(ctx, held, lost, heldLogAfter, func(n int, paused time.Duration) {
		said = true
		if n == 0 {
			log.Warn("reading paused: a dead letter of this record's topic and key is not parked yet, and the key's later records wait for it, in order",
				"topic", k.topic, "key", k.key, "outbox_id", id, "paused_for", paused.Round(time.Second))
			return
		}
		log.Warn("reading still paused: the dead letter of the key is not parked yet", "topic", k.topic, "key", k.key, "paused_for", paused.Round(time.Second))
	}) {
		return false
	}
	if said {
		log.Info("reading resumed: the key's dead letter is parked", "topic", k.topic, "key", k.key, "paused", time.Since(began).Round(time.Millisecond))
	}
	return true
}

// passed returns the letters of topic and key k that a record of k, acknowledged on its topic,
// passed, oldest first: those not parked yet whose records were produced before it (a lower
// seq than the record's, seq).
func (b *letterBudget) passed(k letterKey, seq uint64) []heldLetter {
	if b.ordered.Load() == 0 {
		return nil // no letter held: one atomic load per acknowledgement
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var passed []heldLetter
	for _, h := range b.keys[k] {
		if h.seq < seq {
			passed = append(passed, h)
		}
	}
	return passed
}

// passedLetters says that the record of topic and key k (outbox id id) was acknowledged ahead
// of letters, the dead letters of earlier records of its topic and key: the key's order rests
// on them now (DESIGN.md, "A key's later records wait for its dead letter").
func (r *Relay) passedLetters(k letterKey, id string, letters []heldLetter) {
	r.stats.KeyOrderAtRisk.Add(1)
	r.log.Error("a record was acknowledged ahead of the dead letter of an earlier record of its key: franz-go failed the earlier "+
		"record (its batch refused, or the record too large for a batch) and took this one before the relay heard of the failure; "+
		"the key stays in order only if that letter is parked before the relay stops, or the earlier record is refused again "+
		"on the replay (a crash or a shutdown timeout before the letter is parked, and a refusal that ended, put it after this one)",
		"topic", k.topic, "key", k.key, "outbox_id", id,
		"letter_outbox_id", letters[0].id, "letters", len(letters))
	if r.onPassed != nil {
		r.onPassed(k, letters)
	}
}
