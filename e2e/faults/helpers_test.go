package faults

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// writer commits small outbox transactions and remembers, per key, the ids in commit order.
// It retries while Postgres is away: an insert is only recorded once its commit succeeded, and
// a commit whose outcome is unknown (the connection died during COMMIT) is resolved by
// looking the ids up afterwards.
type writer struct {
	e    *testenv.RelayEnv
	mu   sync.Mutex
	ids  []int64
	keys map[string][]int64
	n    int
}

func newWriter(e *testenv.RelayEnv) *writer { return &writer{e: e, keys: map[string][]int64{}} }

// tx commits one transaction of rows rows over nkeys keys, retrying until ctx ends.
func (w *writer) tx(ctx context.Context, rows, nkeys int) error {
	for {
		ids, keys, err := w.try(ctx, rows, nkeys)
		if err == nil {
			w.record(ids, keys)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ids != nil { // the commit's outcome is unknown: look
			if ok, lerr := w.exists(ctx, ids); lerr == nil {
				if ok {
					w.record(ids, keys)
					return nil
				}
			} else {
				time.Sleep(200 * time.Millisecond)
				continue
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (w *writer) try(ctx context.Context, rows, nkeys int) (ids []int64, keys []string, err error) {
	f := w.e.F
	tx, err := f.Pool.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback(context.Background())
	w.mu.Lock()
	n := w.n
	w.n += rows
	w.mu.Unlock()
	for i := 0; i < rows; i++ {
		key := fmt.Sprintf("k%d", (n+i)%nkeys)
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload) VALUES ($1, $2, $3::jsonb) RETURNING id`,
			key, f.Topic, fmt.Sprintf(`{"n": %d}`, n+i)).Scan(&id); err != nil {
			return nil, nil, err
		}
		ids, keys = append(ids, id), append(keys, key)
	}
	if err := tx.Commit(ctx); err != nil {
		return ids, keys, err
	}
	return ids, keys, nil
}

func (w *writer) exists(ctx context.Context, ids []int64) (bool, error) {
	var n int
	err := w.e.F.Pool.QueryRow(ctx, `SELECT count(*) FROM `+w.e.F.Table+` WHERE id = ANY($1)`, ids).Scan(&n)
	return n == len(ids), err
}

func (w *writer) record(ids []int64, keys []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids = append(w.ids, ids...)
	for i, id := range ids {
		w.keys[keys[i]] = append(w.keys[keys[i]], id)
	}
}

// committed returns every committed id.
func (w *writer) committed() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int64(nil), w.ids...)
}

// run commits a transaction of 1 to 5 rows every interval until ctx ends, in the background;
// the returned func waits for it to stop.
func (w *writer) run(ctx context.Context, interval time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if w.tx(ctx, 1+i%5, 7) != nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	return func() { <-done }
}

// verify checks that every committed id arrived and that per key the first deliveries came in
// commit order. It returns the number of duplicate records.
func (w *writer) verify(t *testing.T, recs []*kgo.Record) int {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	first := map[string][]int64{}
	dups := 0
	for _, r := range recs {
		id := testenv.Header(r, "outbox-id")
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		n, _ := strconv.ParseInt(id, 10, 64)
		first[string(r.Key)] = append(first[string(r.Key)], n)
	}
	lost := 0
	for _, id := range w.ids {
		if !seen[strconv.FormatInt(id, 10)] {
			lost++
			if lost <= 10 {
				t.Errorf("outbox id %d lost", id)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d committed rows lost", lost, len(w.ids))
	}
	for k, want := range w.keys {
		got := first[k]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("key %s: first deliveries %v, commit order %v", k, trunc(got), trunc(want))
		}
	}
	return dups
}

func trunc(ids []int64) []int64 {
	if len(ids) > 20 {
		return ids[:20]
	}
	return ids
}

// hasAll reports whether every id in want has arrived.
func hasAll(want []int64) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		got := make(map[string]bool, len(recs))
		for _, r := range recs {
			got[testenv.Header(r, "outbox-id")] = true
		}
		for _, id := range want {
			if !got[strconv.FormatInt(id, 10)] {
				return false
			}
		}
		return true
	}
}
