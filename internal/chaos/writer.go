package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// writer commits random multi-row transactions over one connection, so commit order is the
// order of its commits. It owns its connection and reconnects when PostgreSQL goes away.
type writer struct {
	s *soak

	mu        sync.Mutex
	ids       []int64            // committed, in commit order
	perKey    map[string][]int64 // committed, per key, in commit order
	rolled    map[int64]bool     // ids of rolled-back (or failed before COMMIT) transactions
	txs       int
	rolledTxs int
	rolledN   int
	ambiguous int
}

func newWriter(s *soak) *writer {
	return &writer{s: s, perKey: map[string][]int64{}, rolled: map[int64]bool{}}
}

func (w *writer) committedSet() map[int64]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[int64]bool, len(w.ids))
	for _, id := range w.ids {
		m[id] = true
	}
	return m
}

// run writes until Rows rows are committed, pacing itself to Rate rows per second, and
// reports the committed count on progress (never blocking).
func (w *writer) run(ctx context.Context, progress chan<- int) error {
	cfg := w.s.cfg
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	start := time.Now()
	written := 0 // rows attempted, for pacing
	for committed := 0; committed < cfg.Rows; {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if conn == nil || conn.IsClosed() {
			c, err := pgx.Connect(ctx, cfg.PGURL)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			conn = c
		}
		n := 1 + w.s.rng.IntN(cfg.MaxTxRows)
		n = min(n, cfg.Rows-committed)
		rollback := w.s.rng.Float64() < cfg.Rollback
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("key-%d", w.s.rng.IntN(cfg.Keys))
		}
		ok, err := w.tx(ctx, conn, keys, rollback)
		written += n
		if err != nil {
			conn.Close(context.Background())
			conn = nil
		}
		if ok {
			committed += n
			select {
			case progress <- committed:
			default:
			}
		}
		// Steady rate: sleep until this many rows are due.
		if due := start.Add(time.Duration(float64(written) / float64(cfg.Rate) * float64(time.Second))); time.Until(due) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(due)):
			}
		}
	}
	return nil
}

// tx writes one transaction and reports whether it committed. A failure before COMMIT rolls
// it back (its ids are recorded as rolled back); a COMMIT whose outcome is unknown is resolved
// by looking the ids up over a new connection.
func (w *writer) tx(ctx context.Context, conn *pgx.Conn, keys []string, rollback bool) (bool, error) {
	s := w.s
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	rows, err := tx.Query(ctx, `INSERT INTO `+s.table+` (aggregate_id, topic, payload)
		SELECT k, $2, jsonb_build_object('k', k, 'i', i) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i
		RETURNING id, aggregate_id`, keys, s.topic)
	var ids []int64
	var idKeys []string
	if err == nil {
		for rows.Next() {
			var id int64
			var k string
			if err = rows.Scan(&id, &k); err != nil {
				break
			}
			ids, idKeys = append(ids, id), append(idKeys, k)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil || rollback {
		tx.Rollback(context.Background())
		w.record(ids, idKeys, false)
		return false, err
	}
	err = tx.Commit(ctx)
	if err == nil {
		w.record(ids, idKeys, true)
		return true, nil
	}
	// Unknown outcome: look, over a connection of its own, once PostgreSQL is back.
	for ctx.Err() == nil {
		var n int
		lerr := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.table+` WHERE id = ANY($1)`, ids).Scan(&n)
		if lerr == nil {
			w.mu.Lock()
			w.ambiguous++
			w.mu.Unlock()
			w.record(ids, idKeys, n == len(ids))
			return n == len(ids), err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false, errors.Join(err, ctx.Err())
}

func (w *writer) record(ids []int64, keys []string, committed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if committed {
		w.txs++
		w.ids = append(w.ids, ids...)
		for i, id := range ids {
			w.perKey[keys[i]] = append(w.perKey[keys[i]], id)
		}
		return
	}
	if len(ids) > 0 {
		w.rolledTxs++
		w.rolledN += len(ids)
	}
	for _, id := range ids {
		w.rolled[id] = true
	}
}
