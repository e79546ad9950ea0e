package oracle

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Beginner starts a transaction: a *pgx.Conn, a *pgxpool.Pool.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Querier runs a query over a connection of its own: a *pgxpool.Pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Writer writes outbox transactions into one table and records them in its Ledger. Each row's
// payload carries its tag ({"n": N, "k": key, "i": its place in the transaction}). Safe for
// concurrent use; commit order is the order of the Ledger's Commit calls, so writers that
// need it exact (the soak) write over one connection.
type Writer struct {
	*Ledger
	table, topic string
	lookup       Querier
	next         atomic.Int64 // the next row's tag
}

// NewWriter writes rows for topic into table; a commit whose outcome is unknown is looked up
// through lookup (a pool: the connection that failed during COMMIT is gone).
func NewWriter(table, topic string, lookup Querier) *Writer {
	return &Writer{Ledger: NewLedger(), table: table, topic: topic, lookup: lookup}
}

// RetryEvery is how long the writer waits before it looks up an unknown commit again.
const RetryEvery = 200 * time.Millisecond

// Tx writes one transaction over db, a row per key (keys[i] the i-th row's aggregate id), and
// commits it, or rolls it back if rollback. It reports whether it committed, and the error the
// transaction met (a caller drops a connection that failed). A failure before COMMIT records
// the rows as rolled back; a COMMIT whose outcome is unknown is looked up through the lookup
// Querier, every RetryEvery until PostgreSQL answers or ctx ends (then nothing is recorded:
// the outcome stays unknown, and the rows are neither expected nor refused).
func (w *Writer) Tx(ctx context.Context, db Beginner, keys []string, rollback bool) (bool, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, err
	}
	rows, err := w.insert(ctx, tx, keys)
	if err != nil || rollback {
		_ = tx.Rollback(context.Background())
		w.Rollback(rows)
		return false, err
	}
	err = tx.Commit(ctx)
	if err == nil {
		w.Commit(rows)
		return true, nil
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	for {
		var n int
		lerr := w.lookup.QueryRow(ctx, `SELECT count(*) FROM `+w.table+` WHERE id = ANY($1)`, ids).Scan(&n)
		if lerr == nil {
			w.ambiguous()
			if n == len(ids) {
				w.Commit(rows)
				return true, err
			}
			w.Rollback(rows)
			return false, err
		}
		select {
		case <-ctx.Done():
			return false, errors.Join(err, ctx.Err())
		case <-time.After(RetryEvery):
		}
	}
}

// insert writes the rows in one statement, in the order of keys, and returns them (as far
// as it got, on an error).
func (w *Writer) insert(ctx context.Context, tx pgx.Tx, keys []string) ([]Row, error) {
	n0 := int(w.next.Add(int64(len(keys)))) - len(keys)
	res, err := tx.Query(ctx, `INSERT INTO `+w.table+` (aggregate_id, topic, payload)
		SELECT k, $2, jsonb_build_object('n', $3::int + i - 1, 'k', k, 'i', i) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i
		RETURNING id, aggregate_id, (payload->>'n')::int`, keys, w.topic, n0)
	if err != nil {
		return nil, fmt.Errorf("oracle: insert into %s: %w", w.table, err)
	}
	defer res.Close()
	var rows []Row
	for res.Next() {
		var r Row
		if err := res.Scan(&r.ID, &r.Key, &r.N); err != nil {
			return rows, err
		}
		rows = append(rows, r)
	}
	if err := res.Err(); err != nil {
		return rows, fmt.Errorf("oracle: insert into %s: %w", w.table, err)
	}
	return rows, nil
}
