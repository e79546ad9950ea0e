package kafkatxn

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Every EndTxn bumps the producer's epoch (KIP-890), and franz-go then restarts the sequence
// numbers of every partition it lists for the producer, under the new epoch. franz-go (v1.22.3)
// lists a topic's partitions only once its first metadata answer is stored, and it stores it
// after it has put the records that waited for that answer into their partitions' buffers.
// Those records can be sent and acknowledged, and the transaction ended, before the store: the
// epoch bump then misses their partition, whose next batch goes out under the new epoch with
// its old sequence, and Kafka refuses it with OUT_OF_ORDER_SEQUENCE_NUMBER. That record fails,
// and with it the next transaction (the relay exits and replays), always on a topic the client
// first wrote to in the transaction just committed. The window is a few instructions of
// franz-go's metadata goroutine, so it is met under load.
//
// loadWatch closes it: it notes every acknowledged record whose partition the client does not
// list yet (kgo.Client.PartitionLeader says -1 with no error), and the Producer waits, before
// it ends a transaction, until the client lists each of them, at most loadWait (a partition
// that never shows up costs at worst the refused batch, as before).
type loadWatch struct {
	cl      *kgo.Client
	mu      sync.Mutex
	pending map[loadKey]struct{}
}

type loadKey struct {
	topic     string
	partition int32
}

// loadWait bounds the wait for the client to list a partition: the store follows the
// acknowledgment within microseconds unless the machine is starved. A variable for tests.
var loadWait = time.Second

// loadPoll is how often the wait looks again.
const loadPoll = time.Millisecond

var _ kgo.HookProduceRecordUnbuffered = (*loadWatch)(nil)

// OnProduceRecordUnbuffered implements kgo.HookProduceRecordUnbuffered: it runs before the
// record's promise, so before a Flush that waits for the record returns.
func (w *loadWatch) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil || w.cl == nil || w.listed(loadKey{r.Topic, r.Partition}) {
		return // a failed record ends its transaction anyway; the client reloads the producer id
	}
	w.note(loadKey{r.Topic, r.Partition})
}

// note adds k to the partitions to wait for.
func (w *loadWatch) note(k loadKey) {
	w.mu.Lock()
	if w.pending == nil {
		w.pending = map[loadKey]struct{}{}
	}
	w.pending[k] = struct{}{}
	w.mu.Unlock()
}

// listed reports whether the client lists k's partition among those it produces to.
func (w *loadWatch) listed(k loadKey) bool {
	leader, _, err := w.cl.PartitionLeader(k.topic, k.partition)
	return leader >= 0 || err != nil
}

// await returns once the client lists every partition noted (true), or loadWait has passed or
// ctx ended (false).
func (w *loadWatch) await(ctx context.Context) bool {
	if w == nil || w.left() == 0 {
		return true
	}
	if loadAwaited != nil {
		loadAwaited()
	}
	deadline := time.NewTimer(loadWait)
	defer deadline.Stop()
	poll := time.NewTicker(loadPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			w.mu.Lock()
			clear(w.pending) // not listed by now: not waited for again
			w.mu.Unlock()
			return false
		case <-poll.C:
			if w.left() == 0 {
				return true
			}
		}
	}
}

// left drops the partitions the client lists now and counts the others.
func (w *loadWatch) left() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.pending {
		if w.listed(k) {
			delete(w.pending, k)
		}
	}
	return len(w.pending)
}

// loadAwaited, when set (tests), is called when a wait finds a partition the client does not
// list yet.
var loadAwaited func()

// findLoadWatch is the loadWatch that Config.ClientOpts gave cl, or nil.
func findLoadWatch(cl *kgo.Client) *loadWatch {
	for _, v := range cl.OptValues(kgo.WithHooks) {
		hooks, _ := v.([]kgo.Hook)
		for _, h := range hooks {
			if w, ok := h.(*loadWatch); ok {
				return w
			}
		}
	}
	return nil
}
