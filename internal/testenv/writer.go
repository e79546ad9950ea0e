package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Writer commits small outbox transactions and remembers, per key, the ids in commit order.
// It retries while Postgres is away: an insert is only recorded once its commit succeeded, and
// a commit whose outcome is unknown (the connection died during COMMIT) is resolved by
// looking the ids up afterwards. Each row's payload is {"n": N}, N unique per Writer, so that
// Verify also catches a record of the same id but another row (after a failover, a transaction
// lost with the old primary can have its id reused on the new one).
type Writer struct {
	pool         *pgxpool.Pool
	table, topic string
	mu           sync.Mutex
	ids          []int64
	ns           map[int64]int // id -> payload n
	keys         map[string][]int64
	n            int
}

// NewWriter writes into table (rows for topic) through pool.
func NewWriter(pool *pgxpool.Pool, table, topic string) *Writer {
	return &Writer{pool: pool, table: table, topic: topic, ns: map[int64]int{}, keys: map[string][]int64{}}
}

// Tx commits one transaction of rows rows over nkeys keys, retrying until ctx ends.
func (w *Writer) Tx(ctx context.Context, rows, nkeys int) error {
	for {
		ids, keys, ns, err := w.try(ctx, rows, nkeys)
		if err == nil {
			w.record(ids, keys, ns)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ids != nil { // the commit's outcome is unknown: look
			if ok, lerr := w.exists(ctx, ids); lerr == nil {
				if ok {
					w.record(ids, keys, ns)
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

func (w *Writer) try(ctx context.Context, rows, nkeys int) (ids []int64, keys []string, ns []int, err error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	defer tx.Rollback(context.Background())
	w.mu.Lock()
	n := w.n
	w.n += rows
	w.mu.Unlock()
	for i := 0; i < rows; i++ {
		key := fmt.Sprintf("k%d", (n+i)%nkeys)
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO `+w.table+` (aggregate_id, topic, payload) VALUES ($1, $2, $3::jsonb) RETURNING id`,
			key, w.topic, fmt.Sprintf(`{"n": %d}`, n+i)).Scan(&id); err != nil {
			return nil, nil, nil, err
		}
		ids, keys, ns = append(ids, id), append(keys, key), append(ns, n+i)
	}
	if err := tx.Commit(ctx); err != nil {
		return ids, keys, ns, err
	}
	return ids, keys, ns, nil
}

func (w *Writer) exists(ctx context.Context, ids []int64) (bool, error) {
	var n int
	err := w.pool.QueryRow(ctx, `SELECT count(*) FROM `+w.table+` WHERE id = ANY($1)`, ids).Scan(&n)
	return n == len(ids), err
}

func (w *Writer) record(ids []int64, keys []string, ns []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids = append(w.ids, ids...)
	for i, id := range ids {
		w.keys[keys[i]] = append(w.keys[keys[i]], id)
		w.ns[id] = ns[i]
	}
}

// Committed returns every committed id.
func (w *Writer) Committed() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int64(nil), w.ids...)
}

// Run commits a transaction of 1 to 5 rows every interval until ctx ends, in the background;
// the returned func waits for it to stop.
func (w *Writer) Run(ctx context.Context, interval time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if w.Tx(ctx, 1+i%5, 7) != nil {
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

// recordRow is the row a record carries: its outbox id and the Writer's payload n.
func recordRow(r *kgo.Record) (id string, n int) {
	var p struct {
		N int `json:"n"`
	}
	n = -1
	if json.Unmarshal(r.Value, &p) == nil {
		n = p.N
	}
	return Header(r, "outbox-id"), n
}

// Verify checks that every committed row arrived (its id with its own payload) and that per
// key the first deliveries came in commit order. It returns the number of duplicate records.
func (w *Writer) Verify(t testing.TB, recs []*kgo.Record) int {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	first := map[string][]int64{}
	dups := 0
	for _, r := range recs {
		id, n := recordRow(r)
		row := id + "/" + strconv.Itoa(n)
		if seen[row] {
			dups++
			continue
		}
		seen[row] = true
		// A record of a row this Writer never committed (lost with an old primary, its id
		// perhaps reused since) is not part of any key's commit order.
		nid, _ := strconv.ParseInt(id, 10, 64)
		if want, ok := w.ns[nid]; ok && want == n {
			first[string(r.Key)] = append(first[string(r.Key)], nid)
		}
	}
	lost := 0
	for _, id := range w.ids {
		if !seen[strconv.FormatInt(id, 10)+"/"+strconv.Itoa(w.ns[id])] {
			lost++
			if lost <= 10 {
				t.Errorf("outbox id %d (n %d) lost", id, w.ns[id])
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

// HasAll reports whether every id in want has arrived.
func HasAll(want []int64) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		got := make(map[string]bool, len(recs))
		for _, r := range recs {
			got[Header(r, "outbox-id")] = true
		}
		for _, id := range want {
			if !got[strconv.FormatInt(id, 10)] {
				return false
			}
		}
		return true
	}
}
