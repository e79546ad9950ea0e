package relay

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
)

// deadTable parks dead letters that the dead-letter topic refused in PostgreSQL
// (Config.DeadLetterTable, always schema-qualified, so the connection's search_path does not
// matter), over a normal connection of its own. Promises push (never blocking); the
// dead-letter goroutine writes. A record's transaction is counted done only once its row is
// committed, so the position never passes a record that is parked nowhere.
// While PostgreSQL is unreachable the goroutine retries with backoff and the position holds.
type deadTable struct {
	connCfg *pgx.ConnConfig // replication.Config.Conn (pgx.ConnectConfig copies it)
	slot    string
	table   outbox.Table // the dead-letter table, always schema-qualified
	log     *slog.Logger
	written func() // called once per row committed

	tableQueue

	conn *pgx.Conn                // owned by the dead-letter goroutine
	w    *deadletters.TableWriter // on conn
}

// parker is the last-resort destination for dead letters that the dead-letter topic refused.
// deadTable is the real one; the simulation tests put a scripted one in its place.
type parker interface {
	push(tableLetter)
	len() int
	// write commits every queued letter, calling done for each letter's transaction after
	// it is safe; it retries until ctx ends.
	write(ctx context.Context, done func(*kgo.Record, *txn)) error
	close()
}

// tableLetter is a dead letter the topic refused, and why.
type tableLetter struct {
	rec     *kgo.Record // the dead-letter record (original key, value, headers + dlq-* headers)
	refusal error       // the dead-letter topic's error
	txn     *txn
}

// tableQueue is the letters queued for a parker: promises push (never blocking), the
// dead-letter goroutine takes them under mu.
type tableQueue struct {
	mu    sync.Mutex
	items []tableLetter
}

func (q *tableQueue) push(l tableLetter) {
	q.mu.Lock()
	q.items = append(q.items, l)
	q.mu.Unlock()
}

func (q *tableQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// write commits every queued letter, retrying with backoff until it succeeds or ctx ends
// (the letters then stay queued, unconfirmed: a restart replays them). done is called for
// each letter's transaction after its row is committed.
func (d *deadTable) write(ctx context.Context, done func(*kgo.Record, *txn)) error {
	err := retry.Backoff{Min: 250 * time.Millisecond, Max: 30 * time.Second}.Until(ctx, func(int) error {
		for d.len() > 0 {
			if err := d.writeOnce(ctx, done); err != nil {
				if d.conn != nil {
					d.conn.Close(context.Background())
					d.conn, d.w = nil, nil
				}
				return err
			}
		}
		return nil
	}, nil, func(err error, wait time.Duration) {
		d.log.Error("cannot park dead letters in PostgreSQL: retrying; the confirmed position holds until they are parked",
			"table", d.table.String(), "queued", d.len(), "retry_in", wait, "cause", err)
	})
	if err != nil {
		return ctx.Err() // every error is retried: only the end of ctx stops it
	}
	return nil
}

func (d *deadTable) writeOnce(ctx context.Context, done func(*kgo.Record, *txn)) error {
	if d.conn == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := pgx.ConnectConfig(cctx, d.connCfg)
		if err == nil {
			d.w, err = deadletters.OpenTableWriter(cctx, conn, d.table)
		}
		if err != nil && conn != nil {
			conn.Close(context.Background())
		}
		cancel()
		if err != nil {
			return err
		}
		d.conn = conn
	}
	d.mu.Lock()
	items := append([]tableLetter(nil), d.items...)
	d.mu.Unlock()
	for i, l := range items {
		if err := d.insert(ctx, l); err != nil {
			d.mu.Lock()
			d.items = d.items[i:]
			d.mu.Unlock()
			return err
		}
		d.log.Error("dead-letter topic refused a record: parked it in PostgreSQL",
			"table", d.table.String(), "outbox_id", string(record.Header(l.rec, record.HeaderOutboxID)),
			"topic", string(record.Header(l.rec, record.HeaderDLQTopic)), "cause", l.refusal)
		d.written()
		done(l.rec, l.txn)
	}
	d.mu.Lock()
	d.items = d.items[len(items):]
	d.mu.Unlock()
	return nil
}

func (d *deadTable) insert(ctx context.Context, l tableLetter) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return d.w.Insert(wctx, d.slot, l.rec, l.refusal)
}

// close closes the connection. It runs after the dead-letter goroutine has stopped.
func (d *deadTable) close() {
	if d.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		d.conn.Close(ctx)
		cancel()
		d.conn, d.w = nil, nil
	}
}
