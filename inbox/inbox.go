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

// Record headers the inbox deduplicates by (sink.HeaderOutboxID, sink.HeaderOutboxTable).
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
		insert: `INSERT INTO ` + t + ` (consumer, outbox_table, outbox_id) VALUES ($1, $2, $3)
ON CONFLICT (consumer, outbox_table, outbox_id) DO NOTHING`,
	}
	if !strings.Contains(cfg.Table, ".") {
		in.bare = tbl.Name
	}
	return in, nil
}

// CreateTable creates the processed table if it does not exist, and migrates a table made by
// an inbox from before the outbox-table header, keyed by (consumer, outbox_id): it adds the
// column outbox_table (text, NOT NULL, default the empty string, so existing marks count as
// marks of records without the header) and makes (consumer, outbox_table, outbox_id) the
// primary key. The migration runs once, in one transaction, and holds an exclusive lock on
// the table while the new primary key's index is built; for a large table run it in a quiet
// moment, or ahead of time (the package documentation gives the statements). On a table
// already migrated it changes nothing and takes no lock beyond CREATE TABLE IF NOT EXISTS.
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
    old_pk name;
BEGIN
    IF ` + migratedSQL + ` THEN
        RETURN;
    END IF;
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', rel);
    IF ` + migratedSQL + ` THEN
        RETURN; -- another consumer migrated it while this one waited for the lock
    END IF;
    EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS outbox_table text NOT NULL DEFAULT %L', rel, '');
    SELECT conname INTO old_pk FROM pg_constraint WHERE conrelid = rel AND contype = 'p';
    IF old_pk IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', rel, old_pk);
    END IF;
    EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY (consumer, outbox_table, outbox_id)', rel);
END
` + tag
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
		return false, nil // a duplicate: the effect already happened
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
