package inbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"

	"github.com/cdc-relay/cdc-relay/internal/contract"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// DefaultTable is the processed table's name unless Config.Table says otherwise.
const DefaultTable = "inbox_processed"

// Record headers the inbox deduplicates by (record.HeaderOutboxID, record.HeaderOutboxTable).
const (
	// HeaderOutboxID carries the outbox id, unique within its source table only.
	HeaderOutboxID = contract.OutboxID
	// HeaderOutboxTable carries the source: "schema.table", or "message:<prefix>" for a
	// logical message. Records of relays before it have none.
	HeaderOutboxTable = contract.OutboxTable
)

// Config configures an Inbox.
type Config struct {
	// Consumer names the consumer (one name per effect: two services reading the same topic
	// each process every event once). Required.
	Consumer string
	// Table is the processed table, "schema.table", or "table" meaning public.table as
	// everywhere in cdc-relay (outbox.ParseTable), never resolved through the connection's
	// search_path. Default DefaultTable (public.inbox_processed).
	Table string
	// Propagator reads the trace context Handle puts in the handler's ctx from the record's
	// headers. Default propagation.TraceContext{} (W3C traceparent and tracestate); pass
	// otel.GetTextMapPropagator() to use the process's global one.
	Propagator propagation.TextMapPropagator
}

// Execer runs a statement: a pgx.Tx, *pgx.Conn or *pgxpool.Pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Beginner starts a transaction: a *pgx.Conn or *pgxpool.Pool.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Inbox records processed (source table, outbox id) pairs for one consumer.
type Inbox struct {
	consumer string
	table    string // quoted
	bare     string // the name Config.Table gave without a schema; "" when it had one
	insert   string
	marked   string // whether a conflict of insert is a mark of this record (see Process)
	// propagator extracts a record's trace context for Handle.
	propagator propagation.TextMapPropagator
}

// New validates cfg and prepares the statements. It does not touch the database.
func New(cfg Config) (*Inbox, error) {
	if cfg.Consumer == "" {
		return nil, ErrNoConsumer
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.Propagator == nil {
		cfg.Propagator = propagation.TraceContext{}
	}
	tbl, err := outbox.ParseTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	t := tbl.Sanitize()
	in := &Inbox{
		consumer:   cfg.Consumer,
		propagator: cfg.Propagator,
		table:      t,
		// No conflict target: during a rolling upgrade the table also has the older version's
		// primary key (consumer, outbox_id) (CreateTable), and a conflict on either is a mark.
		insert: `INSERT INTO ` + t + ` (consumer, outbox_table, outbox_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		marked: `SELECT EXISTS (SELECT 1 FROM ` + t + ` WHERE consumer = $1 AND outbox_id = $3 AND outbox_table IN ($2, ''))`,
	}
	if !strings.Contains(cfg.Table, ".") {
		in.bare = tbl.Name
	}
	return in, nil
}

// CreateTable creates the processed table if it does not exist, and takes a table made by an
// inbox from before the outbox-table header, keyed by (consumer, outbox_id), through the first
// step of its migration: it adds the column outbox_table (text, NOT NULL, default the empty
// string, so existing marks count as marks of records without the header) and a unique index
// on (consumer, outbox_table, outbox_id), and keeps the old primary key, so that consumers of
// the older version (ON CONFLICT (consumer, outbox_id)) go on working while the rollout runs.
// FinishMigration is the second step, once none of them runs. The first step runs once, in one
// transaction, and holds an exclusive lock on the table while the index is built; for a large
// table run it in a quiet moment, or ahead of time (the package documentation gives the
// statements). On a table already migrated it changes nothing and takes no lock beyond
// CREATE TABLE IF NOT EXISTS.
//
// A Config.Table without a schema means public.table. Inboxes before cdc-relay named the
// table that way resolved such a name through the connection's search_path: when the name
// finds a table in another schema there, CreateTable refuses (and creates nothing), naming the
// schema.table to configure so that the marks already made keep deduplicating.
func (in *Inbox) CreateTable(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, in.createSQL()); err != nil {
		return fmt.Errorf("inbox: create or migrate %s: %w", in.table, err)
	}
	return nil
}

// createSQL is CreateTable's script: the table, then a DO block that migrates an old one. The
// statements run in one implicit transaction (simple protocol, no arguments). The migration
// locks the table before it looks again, so that two consumers starting together migrate it
// once.
func (in *Inbox) createSQL() string {
	lit := quoteLiteral(in.table) // the quoted name as a regclass literal
	tag := "$inbox$"
	for strings.Contains(in.table, tag) {
		tag = "$inbox" + tag[1:]
	}
	var guard string
	if in.bare != "" {
		name := pgx.Identifier{in.bare}.Sanitize()
		guard = `DO ` + tag + `
DECLARE
    home name := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.oid = to_regclass(` + quoteLiteral(name) + `));
BEGIN
    IF home <> 'public' THEN
        RAISE EXCEPTION 'inbox: the table name % has no schema, so it means public.%, but this connection''s search_path finds %.%: set inbox.Config.Table to "%.%" to keep its marks', ` +
			quoteLiteral(in.bare) + `, ` + quoteLiteral(in.bare) + `, home, ` + quoteLiteral(in.bare) + `, home, ` + quoteLiteral(in.bare) + `;
    END IF;
END
` + tag + `;
`
	}
	return guard + `CREATE TABLE IF NOT EXISTS ` + in.table + ` (
    consumer     text,
    outbox_table text NOT NULL DEFAULT '',
    outbox_id    text,
    processed_at timestamptz DEFAULT now(),
    PRIMARY KEY (consumer, outbox_table, outbox_id)
);
DO ` + tag + `
DECLARE
    rel regclass := ` + lit + `::regclass;
BEGIN
    IF ` + keyedSQL + ` THEN
        RETURN;
    END IF;
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', rel);
    IF ` + keyedSQL + ` THEN
        RETURN; -- another consumer migrated it while this one waited for the lock
    END IF;
    EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS outbox_table text NOT NULL DEFAULT %L', rel, '');
    -- The old primary key stays: older consumers' ON CONFLICT (consumer, outbox_id) needs it.
    EXECUTE format('CREATE UNIQUE INDEX ON %s (consumer, outbox_table, outbox_id)', rel);
END
` + tag
}

// keyedSQL is true when a unique index of the table (its primary key, or the index the first
// step of the migration adds) includes outbox_table.
const keyedSQL = `EXISTS (SELECT 1 FROM pg_index i
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
        WHERE i.indrelid = rel AND i.indisunique AND a.attname = 'outbox_table')`

// FinishMigration is the second step of the migration CreateTable begins on a table made
// before the outbox-table header: run it once no consumer of the older version runs (their
// ON CONFLICT (consumer, outbox_id) fails with 42P10 afterwards). It drops the primary key
// (consumer, outbox_id) and makes (consumer, outbox_table, outbox_id) the primary key, from the
// unique index CreateTable made. Until then the old key deduplicates by outbox id alone, as the
// older version does, and Process refuses with ErrMigrationUnfinished a record whose id only a
// mark of another source table holds. On a table whose primary key includes outbox_table it
// changes nothing. It holds an exclusive lock on the table for a moment (no index is built).
func (in *Inbox) FinishMigration(ctx context.Context, db Execer) error {
	if err := in.CreateTable(ctx, db); err != nil {
		return err
	}
	lit := quoteLiteral(in.table)
	tag := "$inbox$"
	for strings.Contains(in.table, tag) {
		tag = "$inbox" + tag[1:]
	}
	_, err := db.Exec(ctx, `DO `+tag+`
DECLARE
    rel regclass := `+lit+`::regclass;
    old_pk name;
    idx regclass;
BEGIN
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', rel);
    IF `+migratedSQL+` THEN
        RETURN;
    END IF;
    SELECT conname INTO old_pk FROM pg_constraint WHERE conrelid = rel AND contype = 'p';
    IF old_pk IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', rel, old_pk);
    END IF;
    SELECT i.indexrelid::regclass INTO idx FROM pg_index i
        WHERE i.indrelid = rel AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
          AND i.indkey::int2[] = (SELECT array_agg(a.attnum ORDER BY o.i) FROM unnest(ARRAY['consumer', 'outbox_table', 'outbox_id']) WITH ORDINALITY o(n, i)
              JOIN pg_attribute a ON a.attrelid = rel AND a.attname = o.n)
        LIMIT 1;
    IF idx IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY USING INDEX %s', rel, idx);
    ELSE
        EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY (consumer, outbox_table, outbox_id)', rel);
    END IF;
END
`+tag)
	if err != nil {
		return fmt.Errorf("inbox: finish the migration of %s: %w", in.table, err)
	}
	return nil
}

// migratedSQL is true when the table's primary key includes outbox_table.
const migratedSQL = `EXISTS (SELECT 1 FROM pg_constraint c
        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
        WHERE c.conrelid = rel AND c.contype = 'p' AND a.attname = 'outbox_table')`

// Process marks (table, outboxID) processed inside tx and, only if it was not processed
// before, runs handle with the same tx. It reports whether handle ran. table is the record's
// source (its outbox-table header): outbox ids are unique per table only, so the same id from
// two tables is two events. Pass "" for a record without the header (published before it
// existed): such records dedupe by id alone, among themselves and with the marks an inbox made
// before CreateTable migrated its table. An error from handle is returned as is; the caller
// must then roll tx back (the mark goes with it) so a redelivery retries.
func (in *Inbox) Process(ctx context.Context, tx pgx.Tx, table, outboxID string, handle func(ctx context.Context, tx pgx.Tx) error) (bool, error) {
	if outboxID == "" {
		return false, ErrNoOutboxID
	}
	tag, err := tx.Exec(ctx, in.insert, in.consumer, table, outboxID)
	if err != nil {
		if table != "" {
			return false, fmt.Errorf("inbox: mark outbox id %s of %s processed: %w", outboxID, table, err)
		}
		return false, fmt.Errorf("inbox: mark outbox id %s processed: %w", outboxID, err)
	}
	if tag.RowsAffected() == 0 {
		// A duplicate: the effect already happened. Unless the conflict was with the older
		// version's primary key (consumer, outbox_id), kept during a rolling upgrade, and a
		// mark of another source table: that is another event (a mark of the empty table is
		// an older consumer's, which dedupes by id alone: this record's, most likely).
		if table == "" {
			return false, nil
		}
		var ok bool
		if err := tx.QueryRow(ctx, in.marked, in.consumer, table, outboxID).Scan(&ok); err != nil {
			return false, fmt.Errorf("inbox: look up the mark of outbox id %s of %s: %w", outboxID, table, err)
		}
		if !ok {
			return false, fmt.Errorf("%w: outbox id %s of %s conflicts with the mark of another source table; once no consumer of the version before the outbox-table header runs, call Inbox.FinishMigration (or run the statements in the inbox package documentation)", ErrMigrationUnfinished, outboxID, table)
		}
		return false, nil
	}
	if err := handle(ctx, tx); err != nil {
		return true, err
	}
	return true, nil
}

// Handle processes one Kafka record in its own transaction on db: Process with the record's
// outbox-table header ("" when it has none) and outbox-id header, then commit. It reports whether handle ran (false: a duplicate, skipped).
// When handle fails the transaction is rolled back and the error returned; do not commit the
// record's offset then. The transaction and handle run with ctx carrying the record's trace
// context (ExtractTrace): a traceparent the producer wrote into the outbox row's headers makes
// trace.SpanContextFromContext(ctx) in handle that remote parent.
func (in *Inbox) Handle(ctx context.Context, db Beginner, rec *kgo.Record, handle func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error) (bool, error) {
	ctx = in.ExtractTrace(ctx, rec)
	id := OutboxID(rec)
	if id == "" {
		return false, fmt.Errorf("%w (topic %s, partition %d, offset %d)", ErrNoOutboxID, rec.Topic, rec.Partition, rec.Offset)
	}
	var ran bool
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		ran, err = in.Process(ctx, tx, OutboxTable(rec), id, func(ctx context.Context, tx pgx.Tx) error { return handle(ctx, tx, rec) })
		return err
	})
	if err != nil {
		return false, err
	}
	return ran, nil
}

// Prune deletes this consumer's marks processed before cutoff and returns how many. Only
// prune what can no longer be redelivered: a mark removed too early lets a late duplicate
// run its handler again.
func (in *Inbox) Prune(ctx context.Context, db Execer, cutoff time.Time) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM `+in.table+` WHERE consumer = $1 AND processed_at < $2`, in.consumer, cutoff)
	if err != nil {
		return 0, fmt.Errorf("inbox: prune %s: %w", in.table, err)
	}
	return tag.RowsAffected(), nil
}

// OutboxID returns the record's outbox-id header, or "" when it has none.
func OutboxID(rec *kgo.Record) string { return header(rec, HeaderOutboxID) }

// OutboxTable returns the record's outbox-table header, or "" when it has none (a record
// published before the header existed).
func OutboxTable(rec *kgo.Record) string { return header(rec, HeaderOutboxTable) }

// header returns the first header named key. The publishers refuse rows whose own headers use
// a contract name, so there is only one.
func header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
