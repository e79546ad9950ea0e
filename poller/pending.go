package poller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// WatchPending counts the rows not published yet (published_at IS NULL; with Config.Shard,
// the shard's) and the age of the oldest every interval (default 10s) into Config.Metrics, until ctx ends. It queries on the
// poller's pool, beside the cycles; with the pending-rows index the count reads only that
// index. Failures are logged once per outage.
func (p *Poller) WatchPending(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	p.pendingEvery.Store(int64(interval))
	c := p.cfg.Columns
	q := "SELECT count(*), min(" + pgx.Identifier{c.CreatedAt}.Sanitize() + ") FROM " + p.tbl.Sanitize() +
		" WHERE " + pgx.Identifier{c.PublishedAt}.Sanitize() + " IS NULL"
	if p.cfg.Shard != nil {
		q += " AND (" + p.cfg.Shard.RowFilter(c.AggregateID) + ")" // the shard's rows: what this poller publishes
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		var n int64
		var oldest *time.Time
		qctx, cancel := context.WithTimeout(ctx, interval)
		err := p.pool.QueryRow(qctx, q).Scan(&n, &oldest)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			p.log.Warn("cannot count the pending outbox rows; the pending metrics are stale until it works again", "cause", err)
			failing = true
		case err == nil:
			if failing {
				p.log.Info("pending outbox rows countable again")
			}
			failing = false
			var at time.Time
			if oldest != nil {
				at = *oldest
			}
			p.cfg.Metrics.SetPending(n, at)
			p.pendingOK.Store(time.Now().UnixNano())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PendingReady reports nil if WatchPending counted within three intervals: PostgreSQL answers
// and the table is readable.
func (p *Poller) PendingReady(context.Context) error {
	last := p.pendingOK.Load()
	if last == 0 {
		return errors.New("the outbox table has not been read yet")
	}
	if age := time.Since(time.Unix(0, last)); age > 3*max(time.Duration(p.pendingEvery.Load()), time.Second) {
		return fmt.Errorf("the outbox table was last read %s ago", age.Round(time.Second))
	}
	return nil
}
