package inbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultTable is the processed table's name unless Config.Table says otherwise.
const DefaultTable = "inbox_processed"

// HeaderOutboxID is the record header cdc-relay puts the outbox id in (sink.HeaderOutboxID).
const HeaderOutboxID = "outbox-id"

// Config configures an Inbox.
type Config struct {
	// Consumer names the consumer (one name per effect: two services reading the same topic
	// each process every event once). Required.
	Consumer string
	// Table is the processed table, "table" or "schema.table". Default DefaultTable.
	Table string
}

// Execer runs a statement: a pgx.Tx, *pgx.Conn or *pgxpool.Pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Beginner starts a transaction: a *pgx.Conn or *pgxpool.Pool.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Inbox records processed outbox ids for one consumer.
type Inbox struct {
	consumer string
	table    string // quoted
	insert   string
}

// New validates cfg and prepares the statements. It does not touch the database.
func New(cfg Config) (*Inbox, error) {
	if cfg.Consumer == "" {
		return nil, ErrNoConsumer
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	t := quoteTable(cfg.Table)
	return &Inbox{
		consumer: cfg.Consumer,
		table:    t,
		insert:   `INSERT INTO ` + t + ` (consumer, outbox_id) VALUES ($1, $2) ON CONFLICT (consumer, outbox_id) DO NOTHING`,
	}, nil
}

// CreateTable creates the processed table if it does not exist.
func (in *Inbox) CreateTable(ctx context.Context, db Execer) error {
	_, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+in.table+` (
    consumer     text,
    outbox_id    text,
    processed_at timestamptz DEFAULT now(),
    PRIMARY KEY (consumer, outbox_id)
)`)
	if err != nil {
		return fmt.Errorf("inbox: create %s: %w", in.table, err)
	}
	return nil
}

// Process marks outboxID processed inside tx and, only if it was not processed before, runs
// handle with the same tx. It reports whether handle ran. An error from handle is returned
// as is; the caller must then roll tx back (the mark goes with it) so a redelivery retries.
func (in *Inbox) Process(ctx context.Context, tx pgx.Tx, outboxID string, handle func(ctx context.Context, tx pgx.Tx) error) (bool, error) {
	if outboxID == "" {
		return false, ErrNoOutboxID
	}
	tag, err := tx.Exec(ctx, in.insert, in.consumer, outboxID)
	if err != nil {
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
// outbox-id header, then commit. It reports whether handle ran (false: a duplicate, skipped).
// When handle fails the transaction is rolled back and the error returned; do not commit the
// record's offset then.
func (in *Inbox) Handle(ctx context.Context, db Beginner, rec *kgo.Record, handle func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error) (bool, error) {
	id := OutboxID(rec)
	if id == "" {
		return false, fmt.Errorf("%w (topic %s, partition %d, offset %d)", ErrNoOutboxID, rec.Topic, rec.Partition, rec.Offset)
	}
	var ran bool
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		ran, err = in.Process(ctx, tx, id, func(ctx context.Context, tx pgx.Tx) error { return handle(ctx, tx, rec) })
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
func OutboxID(rec *kgo.Record) string {
	for _, h := range rec.Headers {
		if h.Key == HeaderOutboxID {
			return string(h.Value)
		}
	}
	return ""
}

func quoteTable(t string) string {
	if schema, name, ok := strings.Cut(t, "."); ok {
		return pgx.Identifier{schema, name}.Sanitize()
	}
	return pgx.Identifier{t}.Sanitize()
}
