package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// insertOrder writes one order and its outbox row in one statement, hence one transaction:
// the service side of the outbox pattern. $1 customer, $2 amount, $3 topic.
const insertOrder = `WITH o AS (INSERT INTO %[1]s (customer, amount) VALUES ($1, $2) RETURNING id, customer, amount)
INSERT INTO %[2]s (aggregate_id, topic, payload)
SELECT 'order-' || o.id, $3, jsonb_build_object('event', 'order.created', 'order_id', o.id, 'customer', o.customer,
       'amount', o.amount, 'currency', 'EUR', 'items', jsonb_build_array(jsonb_build_object('sku', 'espresso', 'qty', 2)))
  FROM o RETURNING id`

// insertOne writes one order and returns its outbox id.
func insertOne(ctx context.Context, pool *pgxpool.Pool, f *fixture, customer string) (int64, error) {
	var id int64
	err := pool.QueryRow(ctx, fmt.Sprintf(insertOrder, f.orders, f.outbox), customer, 1, f.topic).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("bench: insert into %s: %w", f.outbox, err)
	}
	return id, nil
}

// steadyLoad writes rate single-row transactions per second for d over writers
// connections, paced open-loop: a ticket per row is issued on schedule and a free writer
// takes it. It returns the rows committed and the time they took.
func steadyLoad(ctx context.Context, pool *pgxpool.Pool, f *fixture, rate int, d time.Duration, writers int, done *atomic.Int64) (time.Duration, error) {
	sql := fmt.Sprintf(insertOrder, f.orders, f.outbox)
	tickets := make(chan struct{}, writers)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			customer := fmt.Sprintf("customer-%d", w)
			for range tickets {
				if _, err := pool.Exec(lctx, sql, customer, 12.5, f.topic); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("bench: steady insert: %w", err); cancel() })
					return
				}
				done.Add(1)
			}
		}(w)
	}
	start := time.Now()
	total := int(float64(rate) * d.Seconds())
	tick := time.NewTicker(time.Millisecond)
	sent := 0
loop:
	for sent < total {
		select {
		case <-lctx.Done():
			break loop
		case now := <-tick.C:
			due := min(total, int(float64(rate)*now.Sub(start).Seconds()))
			for ; sent < due; sent++ {
				select {
				case tickets <- struct{}{}:
				case <-lctx.Done():
					break loop
				}
			}
		}
	}
	tick.Stop()
	close(tickets)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return elapsed, firstErr
	}
	return elapsed, ctx.Err()
}

// backlogLoad writes n orders and outbox rows in transactions of txSize rows with server-side
// loops (a DO block that commits after each transaction), over two sessions. Commits are
// asynchronous: what is measured is reading the backlog, not writing it, and the WAL is the
// same. progress is called after each chunk with the rows written so far.
//
// payload > 0 adds a field of that many random hex characters to each row's payload.
func backlogLoad(ctx context.Context, pool *pgxpool.Pool, f *fixture, n, txSize, payload int, progress func(int)) error {
	const sessions = 2
	chunk := max(txSize, 10_000/txSize*txSize)
	if payload > 0 {
		chunk = max(txSize, 500/txSize*txSize) // each DO block is one statement's worth of WAL
	}
	var (
		next    atomic.Int64
		written atomic.Int64
		wg      sync.WaitGroup
		errs    = make(chan error, sessions)
	)
	for s := 0; s < sessions; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc, release, err := asyncConn(ctx, pool)
			if err != nil {
				errs <- err
				return
			}
			defer release()
			tx := func(size int) string { return backlogTx(f, size, payload) }
			for {
				from := int(next.Add(int64(chunk))) - chunk
				if from >= n {
					return
				}
				rows := min(chunk, n-from)
				if _, err := pc.Exec(ctx, loopBlock(rows, txSize, tx)).ReadAll(); err != nil {
					errs <- fmt.Errorf("bench: write backlog into %s: %w", f.outbox, err)
					return
				}
				progress(int(written.Add(int64(rows))))
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// asyncConn acquires a session of pool with synchronous_commit off, for writing a backlog:
// what is measured is reading it, not writing it, and the WAL is the same. release resets
// the setting and returns the session to the pool.
func asyncConn(ctx context.Context, pool *pgxpool.Pool) (pc *pgconn.PgConn, release func(), err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	pc = conn.Conn().PgConn()
	if _, err := pc.Exec(ctx, `SET synchronous_commit = off`).ReadAll(); err != nil {
		conn.Release()
		return nil, nil, err
	}
	return pc, func() {
		_, _ = pc.Exec(context.Background(), `RESET synchronous_commit`).ReadAll()
		conn.Release()
	}, nil
}

// loopBlock is a server-side loop that writes rows rows in transactions of txSize, the last
// one smaller when txSize does not divide rows: a DO block that commits after each
// transaction. tx(size) is the statement of one transaction of size rows.
func loopBlock(rows, txSize int, tx func(size int) string) string {
	txs, last := rows/txSize, rows%txSize
	var body strings.Builder
	fmt.Fprintf(&body, "DO $$ BEGIN\n  FOR t IN 1..%d LOOP\n    %s;\n    COMMIT;\n  END LOOP;\n", txs, tx(txSize))
	if last > 0 {
		fmt.Fprintf(&body, "  %s;\n  COMMIT;\n", tx(last))
	}
	body.WriteString("END $$")
	return body.String()
}

// loopLoad writes n rows in transactions of txSize on one asynchronous session (asyncConn),
// a loopBlock per chunk of rows; tx(size) is one transaction of size rows.
func loopLoad(ctx context.Context, pool *pgxpool.Pool, n, txSize, chunk int, tx func(size int) string) error {
	pc, release, err := asyncConn(ctx, pool)
	if err != nil {
		return err
	}
	defer release()
	for from := 0; from < n; from += chunk {
		if _, err := pc.Exec(ctx, loopBlock(min(chunk, n-from), txSize, tx)).ReadAll(); err != nil {
			return err
		}
	}
	return nil
}

// backlogTx is one transaction of the backlog: size orders and their outbox rows, each
// payload with a field of payload random hex characters (none for 0). Random, so that neither
// TOAST nor Kafka compression makes the bytes cheaper than a real document's.
func backlogTx(f *fixture, size, payload int) string {
	blob := ""
	if payload > 0 {
		blob = fmt.Sprintf(`, 'blob', (SELECT string_agg(md5(random()::text || o.id || g2), '') FROM generate_series(1, %d) g2)`, (payload+31)/32)
	}
	return fmt.Sprintf(`WITH o AS (INSERT INTO %[1]s (customer, amount) SELECT 'customer-' || g, 12.5 FROM generate_series(1, %[3]d) g RETURNING id, customer, amount)
    INSERT INTO %[2]s (aggregate_id, topic, payload)
    SELECT 'order-' || o.id, '%[4]s', jsonb_build_object('event', 'order.created', 'order_id', o.id, 'customer', o.customer,
           'amount', o.amount, 'currency', 'EUR', 'items', jsonb_build_array(jsonb_build_object('sku', 'espresso', 'qty', 2))%[5]s)
      FROM o`, f.orders, f.outbox, size, f.topic, blob)
}
