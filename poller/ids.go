package poller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/retry"
)

// PublishRows publishes the rows among ids (the id column's text) that are still pending, the
// lowest ids first, Batch rows per transaction, with the record a cycle makes and the cycle's
// order: SELECT ... WHERE published_at IS NULL AND id = ANY(batch) ORDER BY id FOR UPDATE,
// produce, wait for Kafka's acknowledgements, mark published_at, COMMIT. Unlike a cycle it
// waits for rows another publisher holds instead of skipping them, and then sees that
// publisher's mark: a row marked meanwhile is not sent again. Retryable failures (Kafka or
// PostgreSQL unavailable) are retried with the poller's back-off until ctx ends. It returns
// how many rows it published or dead-lettered; Stats counts them as a cycle does. It does not
// close the Poller.
//
// `cdc-relay cutover` uses it for the rows an exported snapshot shows pending.
func (p *Poller) PublishRows(ctx context.Context, ids []string) (int, error) {
	done := 0
	failures := 0
	for len(ids) > 0 && ctx.Err() == nil {
		chunk := ids[:min(len(ids), p.cfg.Batch)]
		n, err := p.cycleIDs(ctx, chunk)
		switch {
		case err == nil:
			done += n
			ids = ids[len(chunk):]
			failures = 0
			continue
		case ctx.Err() != nil:
			return done, ctx.Err()
		case !IsRetryable(err):
			return done, err
		}
		wait := p.backoff().Delay(failures)
		failures++
		p.log.Warn("publishing listed rows failed: they stay pending", "retry_in", wait.Round(time.Millisecond), "cause", err)
		retry.Sleep(ctx, wait)
	}
	return done, ctx.Err()
}

// idsQuery turns the cycle's SELECT into one that reads the pending rows among $1 (text[]),
// all of them, locking each without skipping it.
func idsQuery(sel, idCol, idType string) (string, error) {
	const pending = " IS NULL\n ORDER BY "
	const tail = "\n LIMIT $1\n FOR UPDATE"
	sel = strings.TrimSuffix(sel, skipLocked)
	if strings.Count(sel, pending) != 1 || !strings.HasSuffix(sel, tail) {
		return "", fmt.Errorf("poller: internal: the cycle's SELECT has an unexpected shape:\n%s", sel)
	}
	q := strings.TrimSuffix(sel, tail) + "\n FOR UPDATE"
	return strings.Replace(q, pending, " IS NULL AND o."+idCol+" = ANY($1::text[]::"+idType+"[])\n ORDER BY ", 1), nil
}

// cycleIDs is a cycle over the pending rows among ids.
func (p *Poller) cycleIDs(ctx context.Context, ids []string) (int, error) {
	if err := p.prepare(ctx); err != nil {
		return 0, err
	}
	cols, err := columnsOf(ctx, p.pool, p.tbl)
	if err != nil {
		return 0, err
	}
	sel, err := idsQuery(p.q.sel, pgx.Identifier{p.cfg.Columns.ID}.Sanitize(), cols[p.cfg.Columns.ID])
	if err != nil {
		return 0, err
	}
	// A row marked by someone else meanwhile is not selected: the batch may be empty.
	return p.publishSelected(ctx, func(ctx context.Context, tx pgx.Tx) ([]pending, error) {
		return p.selectIDs(ctx, tx, sel, ids)
	})
}

// selectIDs locks the pending rows among ids and makes their records.
func (p *Poller) selectIDs(ctx context.Context, tx pgx.Tx, sel string, ids []string) ([]pending, error) {
	return p.query(ctx, tx, "listed", len(ids), sel, ids)
}
