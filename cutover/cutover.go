package cutover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/poller"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// Options configure Run.
type Options struct {
	// Slot and Publication are created as `slot create` creates them. Required. The slot must
	// not exist yet.
	Slot, Publication string
	// DeadLetterTable, when set, is created as `slot create` creates it (best effort).
	DeadLetterTable string
	// Poller publishes the pending rows: its Conn, Table, Columns, Topic, DLQTopic,
	// Batch and Sink are used as `cdc-relay poll` uses them.
	Poller poller.Config
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Result says what Run did.
type Result struct {
	PublicationCreated bool
	ConsistentPoint    pglogrepl.LSN // the slot's: rows committed before it were published here
	Snapshot           string        // the exported snapshot's name
	Pending            int           // rows pending in the snapshot (published_at IS NULL)
	Published          int           // of those, rows published (or dead-lettered) and marked here
	MarkedMeanwhile    int           // of those, rows someone else marked before Run reached them
	DeadLettered       int64
}

// Run creates the slot with an exported snapshot and publishes the rows pending in it. See the
// package documentation.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	pcfg := o.Poller
	if pcfg.Conn == nil {
		return res, errors.New("cutover: no PostgreSQL connection configured")
	}
	if pcfg.Table == "" {
		pcfg.Table = outbox.DefaultTable
	}
	cc := pcfg.Conn.Copy()
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "cdc-relay cutover"
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return res, fmt.Errorf("cutover: connect to PostgreSQL at %s:%d: %w", cc.Host, cc.Port, err)
	}
	defer conn.Close(context.Background())
	warnRunningPoller(ctx, conn, log)

	rc := cc.Config.Copy() // the same server, replication=database
	rc.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		return res, fmt.Errorf("cutover: replication connection to PostgreSQL at %s:%d: %w", rc.Host, rc.Port, err)
	}
	replClosed := false
	closeRepl := func() {
		if !replClosed {
			replClosed = true
			_ = repl.Close(context.Background())
		}
	}
	defer closeRepl()

	store := slotstore.New(conn)
	cr, err := store.Create(ctx, slotstore.CreateOptions{
		Slot: o.Slot, Publication: o.Publication, Tables: []string{pcfg.Table}, ExportSnapshot: repl,
	})
	if err != nil {
		return res, err
	}
	res.PublicationCreated, res.ConsistentPoint, res.Snapshot = cr.PublicationCreated, cr.ConsistentPoint, cr.Snapshot
	log.Info("created the slot with an exported snapshot", "slot", o.Slot, "consistent_point", cr.ConsistentPoint, "snapshot", cr.Snapshot)
	if o.DeadLetterTable != "" {
		if err := deadletters.CreateTable(ctx, conn, o.DeadLetterTable); err != nil {
			log.Warn("dead-letter table not created; the relay creates it on first use", "table", o.DeadLetterTable, "cause", err)
		}
	}
	fail := func(err error) (Result, error) {
		closeRepl()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if derr := slotstore.New(conn).Drop(dctx, o.Slot, ""); derr != nil {
			return res, fmt.Errorf("%w; dropping slot %s failed too (%v): drop it with `cdc-relay slot drop --slot %s` before running cutover again, and do not start `cdc-relay run` on it", err, o.Slot, derr, o.Slot)
		}
		return res, fmt.Errorf("%w; slot %s was dropped again: run cutover again", err, o.Slot)
	}

	ids, err := pendingInSnapshot(ctx, conn, pcfg, cr.Snapshot)
	closeRepl() // the snapshot is no longer needed
	if err != nil {
		return fail(err)
	}
	res.Pending = len(ids)
	log.Info("rows pending in the snapshot", "rows", len(ids))

	p, err := poller.New(pcfg)
	if err != nil {
		return fail(err)
	}
	defer p.Close()
	if err := p.Check(ctx, max(pcfg.Conn.ConnectTimeout, 10*time.Second)); err != nil {
		return fail(err)
	}
	n, err := p.PublishRows(ctx, ids)
	res.Published = n
	res.DeadLettered = p.Stats().DeadLettered.Load()
	if err != nil {
		return fail(fmt.Errorf("cutover: published %d of %d pending rows: %w", n, len(ids), err))
	}
	res.MarkedMeanwhile = len(ids) - n
	return res, nil
}

// pendingInSnapshot lists the ids of the rows pending in the exported snapshot.
func pendingInSnapshot(ctx context.Context, conn *pgx.Conn, cfg poller.Config, snapshot string) ([]string, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("cutover: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(snapshot)); err != nil {
		return nil, fmt.Errorf("cutover: import snapshot %s: %w", snapshot, err)
	}
	tbl, err := outbox.ParseTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("cutover: %w", err)
	}
	cols := cfg.Columns.WithDefaults()
	id, pub := pgx.Identifier{cols.ID}.Sanitize(), pgx.Identifier{cols.PublishedAt}.Sanitize()
	rows, err := tx.Query(ctx, `SELECT `+id+`::text FROM `+tbl.Sanitize()+` WHERE `+pub+` IS NULL ORDER BY `+id)
	if err != nil {
		return nil, fmt.Errorf("cutover: list the pending rows of %s: %w", cfg.Table, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("cutover: list the pending rows of %s: %w", cfg.Table, err)
	}
	return ids, tx.Commit(ctx)
}

// warnRunningPoller warns when a `cdc-relay poll` is connected: it and the relay would both
// publish new rows.
func warnRunningPoller(ctx context.Context, conn *pgx.Conn, log *slog.Logger) {
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cdc-relay poll' AND datname = current_database()`).Scan(&n); err == nil && n > 0 {
		log.Warn("a `cdc-relay poll` is still connected: stop the old poller before the relay starts, or both publish every new row", "sessions", n)
	}
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
