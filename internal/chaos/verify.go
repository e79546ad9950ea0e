package chaos

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// delivery is one record read from the topic.
type delivery struct {
	id        int64
	key       string
	partition int32
	offset    int64
	at        time.Time // the producer's timestamp: when the relay produced it
}

// verifier is the independent consumer: it reads the topic and the dead-letter topic from
// the start, with a client of its own, and keeps every record's id, key and position.
type verifier struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	recs    []delivery
	seen    map[int64]bool
	dead    int
	bad     int // records without a readable outbox-id
	changed chan struct{}
}

func newVerifier(brokers []string, topic, dlq string) (*verifier, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic, dlq),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	v := &verifier{cl: cl, cancel: cancel, done: make(chan struct{}), seen: map[int64]bool{}, changed: make(chan struct{}, 1)}
	go func() {
		defer close(v.done)
		for ctx.Err() == nil {
			fs := v.cl.PollFetches(ctx)
			v.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if r.Topic == dlq {
					v.dead++
					return
				}
				var id int64
				var perr error
				for _, h := range r.Headers {
					if h.Key == "outbox-id" {
						id, perr = strconv.ParseInt(string(h.Value), 10, 64)
					}
				}
				if id == 0 || perr != nil {
					v.bad++
					return
				}
				v.recs = append(v.recs, delivery{id: id, key: string(r.Key), partition: r.Partition, offset: r.Offset, at: r.Timestamp})
				v.seen[id] = true
			})
			v.mu.Unlock()
			select {
			case v.changed <- struct{}{}:
			default:
			}
		}
	}()
	return v, nil
}

func (v *verifier) close() {
	v.cancel()
	<-v.done
	v.cl.Close()
}

// waitFor waits until every id in want has been read, or timeout.
func (v *verifier) waitFor(ctx context.Context, want map[int64]bool, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		v.mu.Lock()
		missing := 0
		for id := range want {
			if !v.seen[id] {
				missing++
			}
		}
		v.mu.Unlock()
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("chaos: %d of %d committed rows still missing after %s", missing, len(want), timeout)
		case <-v.changed:
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// check fills in the verdict: loss, rolled-back rows, per-key order of first deliveries
// against commit order, duplicates and their attribution to the fault before them.
func (v *verifier) check(w *writer, res *Result) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	res.Committed, res.CommittedTxs = len(w.ids), w.txs
	res.RolledBack, res.RolledBackTxs, res.Ambiguous = w.rolledN, w.rolledTxs, w.ambiguous
	res.Records, res.DeadLettered = len(v.recs), v.dead

	// Offset order per partition is the order a consumer sees.
	recs := append([]delivery(nil), v.recs...)
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].partition != recs[j].partition {
			return recs[i].partition < recs[j].partition
		}
		return recs[i].offset < recs[j].offset
	})
	first := map[int64]bool{}
	perKey := map[string][]int64{}
	var dups []delivery
	for _, d := range recs {
		if first[d.id] {
			dups = append(dups, d)
			continue
		}
		first[d.id] = true
		perKey[d.key] = append(perKey[d.key], d.id)
	}
	res.Duplicates = len(dups)
	for _, id := range w.ids {
		if !first[id] {
			res.Lost++
		}
	}
	for id := range w.rolled {
		if first[id] {
			res.RolledBackSeen++
		}
	}
	keys := make([]string, 0, len(w.perKey))
	for k := range w.perKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, got := w.perKey[k], perKey[k]
		if !equal(want, got) {
			res.OrderViolations++
			if res.FirstOrderProblem == "" {
				res.FirstOrderProblem = fmt.Sprintf("key %s: first deliveries %v..., commit order %v...", k, head(got), head(want))
			}
		}
	}
	// A duplicate is the replay after the fault that came last before it was produced.
	ev := res.Events
	for _, d := range dups {
		i := sort.Search(len(ev), func(i int) bool { return ev[i].At.After(d.at) }) - 1
		if i >= 0 {
			ev[i].Dups++
		}
	}
	for _, e := range ev {
		if e.Kind == "kill" && e.Dups > res.MaxDupsOneCrash {
			res.MaxDupsOneCrash, res.MaxDupsCrash = e.Dups, e.N
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func head(ids []int64) []int64 {
	if len(ids) > 8 {
		return ids[:8]
	}
	return ids
}
