package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// PendingWatcher counts the outbox rows the polling publisher has not published yet
// (published_at IS NULL) and the age of the oldest, every Interval, on its own connection.
// With the poller's partial index on pending rows the count reads only that index.
type PendingWatcher struct {
	ConnString string         // PostgreSQL URL. Required.
	Password   string         // replaces ConnString's password when set (--pg-password-file); never logged
	Table      string         // "schema.table" or "table" (public.table). Required.
	Columns    outbox.Columns // CreatedAt and PublishedAt are read; zero fields take the defaults
	Interval   time.Duration  // default 10s
	Metrics    *Poller        // required
	Logger     *slog.Logger   // default slog.Default()

	lastOK atomic.Int64 // unix nanos of the last successful count
}

// Run counts until ctx ends and returns nil then. Failures are logged once per outage.
func (w *PendingWatcher) Run(ctx context.Context) error {
	if w.Metrics == nil || w.ConnString == "" || w.Table == "" {
		return errors.New("metrics: PendingWatcher needs ConnString, Table and Metrics")
	}
	if w.Interval <= 0 {
		w.Interval = 10 * time.Second
	}
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	tbl, err := outbox.ParseTable(w.Table)
	if err != nil {
		return fmt.Errorf("metrics: PendingWatcher: %w", err)
	}
	cols := w.Columns.WithDefaults()
	q := "SELECT count(*), min(" + pgx.Identifier{cols.CreatedAt}.Sanitize() + ") FROM " + tbl.Sanitize() +
		" WHERE " + pgx.Identifier{cols.PublishedAt}.Sanitize() + " IS NULL"
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	failing := false
	for {
		var err error
		if conn == nil || conn.IsClosed() {
			conn, err = connect(ctx, w.ConnString, w.Password, "cdc-relay-pending", w.Interval)
		}
		if err == nil {
			var n int64
			var oldest *time.Time
			qctx, cancel := context.WithTimeout(ctx, w.Interval)
			err = conn.QueryRow(qctx, q).Scan(&n, &oldest)
			cancel()
			if err == nil {
				var at time.Time
				if oldest != nil {
					at = *oldest
				}
				w.Metrics.SetPending(n, at)
				w.lastOK.Store(time.Now().UnixNano())
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			w.Logger.Warn("cannot count the pending outbox rows; the pending metrics are stale until it works again", "table", w.Table, "cause", err)
			failing = true
		case err == nil && failing:
			w.Logger.Info("pending outbox rows countable again", "table", w.Table)
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Ready reports nil if the last count succeeded within three intervals: PostgreSQL answers
// and the table is readable.
func (w *PendingWatcher) Ready(context.Context) error {
	last := w.lastOK.Load()
	if last == 0 {
		return errors.New("the outbox table has not been read yet")
	}
	if age := time.Since(time.Unix(0, last)); age > 3*max(w.Interval, time.Second) {
		return fmt.Errorf("the outbox table was last read %s ago", age.Round(time.Second))
	}
	return nil
}

// connect opens a normal connection named app, bounded by timeout.
func connect(ctx context.Context, connString, password, app string, timeout time.Duration) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	if password != "" {
		cfg.Password = password
	}
	cfg.RuntimeParams["application_name"] = app
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return conn, nil
}
