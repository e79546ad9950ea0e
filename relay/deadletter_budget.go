package relay

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// letterBudget bounds the dead letters held in memory: queued for the dead-letter topic, in
// flight to it, or waiting for the dead-letter table. Records too large for Kafka fail at once,
// never blocking Produce, so without a bound they would pile up for as long as neither
// destination takes them. Dead letters count against the producer's own limits: before the
// pipeline produces the next record, it waits while letters are held and letters plus the
// producer's buffer and the next record would pass MaxBufferedRecords or MaxBufferedBytes. The
// relay then holds at most those limits whatever Kafka and PostgreSQL refuse (a record larger
// than the limits on its own is let through alone). Without letters it never
// waits here: the producer's buffer blocks Produce by itself.
type letterBudget struct {
	maxRecords int
	maxBytes   int64

	buffered func() (records, bytes int64) // the producer's buffer now
	waiting  atomic.Bool                   // the pipeline waits: acknowledgements signal

	any atomic.Int64 // records, readable without the lock: the per-record fast path

	mu      sync.Mutex
	records int
	bytes   int64
	freed   chan struct{} // signalled when a letter leaves

	// The letters that hold their key's later records (deadletter_order.go), under mu: per original
	// topic and key (oldest first), and per letter. ordered is len(keyOf), readable without the
	// lock.
	keys    map[letterKey][]heldLetter
	keyOf   map[*kgo.Record]letterKey
	ordered atomic.Int64
}

// heldLetter is an ordered letter, the outbox id and the produce sequence number of the record
// it stands for (Relay.produced).
type heldLetter struct {
	rec *kgo.Record
	id  string
	seq uint64
}

func newLetterBudget(records, bytes int, buffered func() (int64, int64)) *letterBudget {
	return &letterBudget{maxRecords: records, maxBytes: int64(bytes), buffered: buffered, freed: make(chan struct{}, 1),
		keys: map[letterKey][]heldLetter{}, keyOf: map[*kgo.Record]letterKey{}}
}

// letterSize is the size of the record a letter parks: key, value and the record's own headers,
// not the dlq-* headers that say why (bounded metadata), so a record counts the same in the
// producer's buffer and as a letter.
func letterSize(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, "dlq-") {
			n += len(h.Key) + len(h.Value)
		}
	}
	return int64(n)
}

// add counts the letter dl.rec until remove; dl.ordered: its key's later records (of dl.key) wait
// for it (deadletter_order.go), dl.seq being the produce sequence number of the record it
// stands for.
func (b *letterBudget) add(dl deadLetter) {
	r := dl.rec
	b.mu.Lock()
	b.records++
	b.any.Add(1)
	b.bytes += letterSize(r)
	if dl.ordered {
		b.keys[dl.key] = append(b.keys[dl.key], heldLetter{rec: r, id: dl.id, seq: dl.seq})
		b.keyOf[r] = dl.key
		b.ordered.Add(1)
	}
	b.mu.Unlock()
}

func (b *letterBudget) remove(r *kgo.Record) {
	b.mu.Lock()
	b.records--
	b.any.Add(-1)
	b.bytes -= letterSize(r)
	if k, ok := b.keyOf[r]; ok {
		delete(b.keyOf, r)
		held := slices.DeleteFunc(b.keys[k], func(h heldLetter) bool { return h.rec == r })
		if len(held) == 0 {
			delete(b.keys, k)
		} else {
			b.keys[k] = held
		}
		b.ordered.Add(-1)
	}
	b.mu.Unlock()
	b.signal()
}

// signal wakes a waiting pipeline: a letter left, or the producer's buffer shrank.
func (b *letterBudget) signal() {
	if !b.waiting.Load() {
		return
	}
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// held returns the letters and bytes held now.
func (b *letterBudget) held() (int, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.records, b.bytes
}

// full reports whether producing a record of next bytes could take the letters and the
// producer's buffer over the limits (it may become a letter at once: too large, a bad row).
func (b *letterBudget) full(next int64) bool {
	records, bytes := b.held()
	if records == 0 {
		return false
	}
	bufRecords, bufBytes := b.buffered()
	return int64(records)+bufRecords+1 > int64(b.maxRecords) || bytes+bufBytes+next > b.maxBytes
}

// wait returns once the budget has room for next, or false when ctx ends or lost reports the
// session lost first (its record is not produced: lost.go; sessionLost's mark waits for the
// pipeline). While it waits, reading is paused; it says so once, and again every minute.
func (b *letterBudget) wait(ctx context.Context, next *kgo.Record, log *slog.Logger, lost func() bool) bool {
	if b.any.Load() == 0 {
		return true // no letter held: the producer's own buffer is the bound (one atomic load per record)
	}
	size := letterSize(next)
	if !b.full(size) {
		return true
	}
	began := time.Now()
	records, bytes := b.held()
	log.Warn("reading paused: dead letters wait for the dead-letter topic or table to take them; the confirmed position holds until they are parked",
		"letters", records, "bytes", bytes, "max_records", b.maxRecords, "max_bytes", b.maxBytes)
	full := func() bool { return b.full(size) }
	if !b.pause(ctx, full, lost, heldLogEvery, func(_ int, paused time.Duration) {
		records, bytes := b.held()
		log.Warn("reading still paused: dead letters are not being parked", "for", paused.Round(time.Second), "letters", records, "bytes", bytes)
	}) {
		return false
	}
	log.Info("reading resumed: dead letters are parked again", "paused", time.Since(began).Round(time.Millisecond))
	return true
}

// pause blocks the pipeline while held reports true, woken by every letter that leaves and every
// lostPoll (the producer's buffer shrinks without a signal when Kafka fails records, and a lost
// session sends none). It returns false when ctx ends or lost reports the session lost first
// (sessionLost's mark must reach the pipeline). say is called once the pause lasted first, and
// again every heldLogEvery, with how many times it was called before.
func (b *letterBudget) pause(ctx context.Context, held, lost func() bool, first time.Duration, say func(n int, paused time.Duration)) bool {
	b.waiting.Store(true)
	defer b.waiting.Store(false)
	began := time.Now()
	poll := time.NewTicker(lostPoll)
	defer poll.Stop()
	next := time.NewTimer(first)
	defer next.Stop()
	for n := 0; held(); {
		if lost() {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-b.freed:
		case <-poll.C:
		case <-next.C:
			say(n, time.Since(began))
			n++
			next.Reset(heldLogEvery)
		}
	}
	return true
}

// lostPoll is how often a paused pipeline looks at what no signal tells it: whether the session
// was lost, and the producer's buffer.
const lostPoll = 100 * time.Millisecond
