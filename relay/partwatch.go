package relay

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// partWatch follows, per topic partition, the records the producer buffers and when that
// partition last made progress (a record partitioned into an empty partition, or finished),
// through franz-go's partitioned and unbuffered hooks (a record can be unbuffered without ever
// being partitioned: too large, an unknown topic; those are not counted). One partition whose leader is gone retries its records
// forever while the others are acknowledged: the relay-wide outage watch never sees that, and
// the position holds at its oldest record. stuck names such partitions (DESIGN.md, "Broker
// outage"). Safe for concurrent use: the hooks run on franz-go's goroutines.
type partWatch struct {
	mu   sync.Mutex
	m    map[topicPartition]*partState
	recs map[*kgo.Record]struct{} // partitioned and not yet finished
}

type topicPartition struct {
	topic     string
	partition int32
}

type partState struct {
	buffered int
	progress time.Time // last record buffered into an empty partition, or finished
}

var (
	_ kgo.HookProduceRecordPartitioned = (*partWatch)(nil)
	_ kgo.HookProduceRecordUnbuffered  = (*partWatch)(nil)
)

func newPartWatch() *partWatch {
	return &partWatch{m: map[topicPartition]*partState{}, recs: map[*kgo.Record]struct{}{}}
}

// OnProduceRecordPartitioned implements kgo.HookProduceRecordPartitioned.
func (w *partWatch) OnProduceRecordPartitioned(r *kgo.Record, _ int32) {
	tp := topicPartition{r.Topic, r.Partition}
	w.mu.Lock()
	w.recs[r] = struct{}{}
	st := w.m[tp]
	if st == nil {
		st = &partState{progress: time.Now()}
		w.m[tp] = st
	}
	st.buffered++
	w.mu.Unlock()
}

// OnProduceRecordUnbuffered implements kgo.HookProduceRecordUnbuffered.
func (w *partWatch) OnProduceRecordUnbuffered(r *kgo.Record, _ error) {
	tp := topicPartition{r.Topic, r.Partition}
	w.mu.Lock()
	if _, ok := w.recs[r]; !ok {
		w.mu.Unlock()
		return
	}
	delete(w.recs, r)
	if st := w.m[tp]; st != nil {
		st.buffered--
		st.progress = time.Now()
		if st.buffered <= 0 {
			delete(w.m, tp)
		}
	}
	w.mu.Unlock()
}

// stuckPartition is a partition that has held records without progress for a while.
type stuckPartition struct {
	topicPartition
	buffered int
	since    time.Time
}

func (p stuckPartition) String() string {
	return fmt.Sprintf("topic %s partition %d (%d records, no acknowledgement since %s)",
		p.topic, p.partition, p.buffered, p.since.UTC().Format(time.RFC3339))
}

// stuck returns the partitions that have held records for after without progress, the longest
// stuck first.
func (w *partWatch) stuck(after time.Duration) []stuckPartition {
	now := time.Now()
	w.mu.Lock()
	var out []stuckPartition
	for tp, st := range w.m {
		if st.buffered > 0 && now.Sub(st.progress) >= after {
			out = append(out, stuckPartition{tp, st.buffered, st.progress})
		}
	}
	w.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].since.Before(out[j].since) })
	return out
}

func describeStuck(ps []stuckPartition) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}
