package chaos

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/oracle"
)

// verifier is the independent consumer: it reads the topic and the dead-letter topic from
// the start, with a client of its own, and keeps every record's id, key and position.
type verifier struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	recs    []oracle.Delivery
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
				d, err := oracle.Read(r)
				if err != nil {
					v.bad++
					return
				}
				v.recs = append(v.recs, d)
				v.seen[d.ID] = true
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

// check fills in the verdict (internal/oracle's: loss, rolled-back rows delivered, per-key
// order of first deliveries against commit order, duplicates) and blames each duplicate on
// the fault that came last before it was produced.
func (v *verifier) check(w *writer, res *Result) {
	v.mu.Lock()
	recs := append([]oracle.Delivery(nil), v.recs...)
	res.DeadLettered = v.dead
	v.mu.Unlock()
	c := w.Counts()
	res.Committed, res.CommittedTxs = c.Rows, c.Txs
	res.RolledBack, res.RolledBackTxs, res.Ambiguous = c.RolledBack, c.RolledBackTxs, c.Ambiguous
	verdict := w.Check(recs)
	res.Records, res.Duplicates = verdict.Records, len(verdict.Duplicates)
	res.Lost, res.RolledBackSeen, res.OrderViolations = len(verdict.Lost), len(verdict.RolledBackSeen), len(verdict.Reordered)
	if len(verdict.Reordered) > 0 {
		res.FirstOrderProblem = verdict.Reordered[0].String()
	}
	ev := res.Events
	for _, d := range verdict.Duplicates {
		i := sort.Search(len(ev), func(i int) bool { return ev[i].At.After(d.At) }) - 1
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
