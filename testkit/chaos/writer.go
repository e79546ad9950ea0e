package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/testkit/oracle"
)

// writer commits random multi-row transactions over one connection, so commit order is the
// order of its commits (testkit/oracle's Writer, whose Ledger the verdict reads). It owns its
// connection and reconnects when PostgreSQL goes away.
type writer struct {
	s *soak
	*oracle.Writer
}

func newWriter(s *soak) *writer {
	return &writer{s: s, Writer: oracle.NewWriter(s.table, s.topic, s.pool)}
}

func (w *writer) committedSet() map[int64]bool {
	ids := w.Committed()
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
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
		ok, err := w.Tx(ctx, conn, keys, rollback)
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
