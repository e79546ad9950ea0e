// Command order-service is the order demo's service (scripts/seed-demo.sh): each order is an orders
// row and an outbox row written in one PostgreSQL transaction, in its own schema so the demo
// can be reset without touching anything else. scripts/seed-demo.sh drives it.
//
//	order-service init    [--reset]                 create the schema: orders, outbox, inbox_processed, reservations
//	order-service orders  --count N --topic T       write N orders
//	order-service count   [--slot S] orders|outbox|pending
//	                                                print a count; pending: published_at IS NULL (the polling
//	                                                publisher), or with --slot the outbox inserts past the slot's
//	                                                confirmed position (cdc-relay run; the relay must be stopped)
//	order-service wait-pending   [--timeout 2m]     wait until no outbox row is pending (the polling publisher)
//	order-service wait-confirmed --slot S [--timeout 2m]
//	                                                wait until the slot confirmed the WAL written so far (cdc-relay run)
//
// Flags have environment defaults: --pg-url CDC_RELAY_PG_URL, --schema SEED_SCHEMA (seed_cdc).
// Exit codes: 0 done, 1 failure, 2 bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cdc-relay/cdc-relay/tools/internal/demo"
)

func main() {
	cmd, fs := demo.Subcommand("order-service", "usage: order-service init|orders|count|wait-pending|wait-confirmed [flags]")
	pgURL := fs.String("pg-url", os.Getenv("CDC_RELAY_PG_URL"), "PostgreSQL URL")
	schema := fs.String("schema", demo.EnvOr("SEED_SCHEMA", "seed_cdc"), "schema holding the demo's tables")
	topic := fs.String("topic", demo.EnvOr("SEED_TOPIC", "brew.orders.v1"), "topic the outbox rows name")
	count := fs.Int("count", 20, "orders to write")
	slot := fs.String("slot", "", "replication slot (wait-confirmed; count pending of cdc-relay run)")
	publication := fs.String("publication", "", "publication of --slot (count pending; default: the slot's name)")
	reset := fs.Bool("reset", false, "init: drop the schema first")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long wait-* waits")
	_ = fs.Parse(os.Args[2:])
	if *publication == "" {
		*publication = *slot
	}
	if *pgURL == "" {
		fmt.Fprintln(os.Stderr, "order-service: --pg-url or CDC_RELAY_PG_URL is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, *pgURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "order-service:", err)
		os.Exit(2) //nolint:gocritic // exitAfterDefer: the deferred stop only releases the signal handler, as exiting does
	}
	defer pool.Close()
	s := &service{pool: pool, schema: pgx.Identifier{*schema}.Sanitize()}
	switch cmd {
	case "init":
		err = s.init(ctx, *reset)
	case "orders":
		err = s.orders(ctx, *count, *topic)
	case "count":
		if fs.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "usage: order-service count [--slot S] orders|outbox|pending (flags first)")
			os.Exit(2)
		}
		var n int64
		if fs.Arg(0) == "pending" && *slot != "" {
			n, err = s.pendingInSlot(ctx, *slot, *publication)
		} else {
			n, err = s.count(ctx, fs.Arg(0))
		}
		if err == nil {
			fmt.Println(n)
		}
	case "wait-pending":
		err = s.waitPending(ctx, *timeout)
	case "wait-confirmed":
		err = s.waitConfirmed(ctx, *slot, *timeout)
	default:
		fmt.Fprintf(os.Stderr, "order-service: unknown command %q\n", cmd)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "order-service:", err)
		os.Exit(1)
	}
}

type service struct {
	pool   *pgxpool.Pool
	schema string // quoted
}

func (s *service) t(name string) string { return s.schema + "." + name }

func (s *service) init(ctx context.Context, reset bool) error {
	if reset {
		if _, err := s.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+s.schema+` CASCADE`); err != nil {
			return fmt.Errorf("drop schema: %w", err)
		}
	}
	_, err := s.pool.Exec(ctx, `
CREATE SCHEMA IF NOT EXISTS `+s.schema+`;`+demo.OrdersTables(s.t("orders"), s.t("outbox"))+`
CREATE INDEX IF NOT EXISTS outbox_pending_idx ON `+s.t("outbox")+` (id) WHERE published_at IS NULL;
CREATE TABLE IF NOT EXISTS `+s.t("reservations")+` (
    order_id    TEXT        NOT NULL,
    outbox_id   TEXT        NOT NULL,
    reserved_at TIMESTAMPTZ NOT NULL DEFAULT now()
);`)
	if err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	return nil
}

// orders writes count orders, each an orders row and an outbox row in one transaction.
func (s *service) orders(ctx context.Context, count int, topic string) error {
	for i := 0; i < count; i++ {
		customer := fmt.Sprintf("customer-%d", i%17)
		amount := 10 + i%90
		var orderID, outboxID int64
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `INSERT INTO `+s.t("orders")+` (customer_id, amount) VALUES ($1, $2) RETURNING id`, customer, amount).Scan(&orderID); err != nil {
				return fmt.Errorf("INSERT orders: %w", err)
			}
			aggregateID := fmt.Sprintf("order-%d", orderID)
			payload, _ := json.Marshal(map[string]any{"order_id": aggregateID, "customer_id": customer, "amount": amount})
			headers, _ := json.Marshal(map[string]string{"correlation-id": fmt.Sprintf("checkout-%d", orderID)})
			if err := tx.QueryRow(ctx, `INSERT INTO `+s.t("outbox")+` (aggregate_id, topic, payload, event_type, headers)
				VALUES ($1, $2, $3, 'order.created', $4) RETURNING id`, aggregateID, topic, payload, headers).Scan(&outboxID); err != nil {
				return fmt.Errorf("INSERT outbox: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Printf("ORDER order-%d outbox-id=%d\n", orderID, outboxID)
	}
	fmt.Printf("wrote %d orders\n", count)
	return nil
}

func (s *service) count(ctx context.Context, what string) (int64, error) {
	var q string
	switch what {
	case "orders":
		q = `SELECT count(*) FROM ` + s.t("orders")
	case "outbox":
		q = `SELECT count(*) FROM ` + s.t("outbox")
	case "pending":
		q = `SELECT count(*) FROM ` + s.t("outbox") + ` WHERE published_at IS NULL`
	default:
		return 0, errors.New("count what? orders, outbox or pending")
	}
	var n int64
	if err := s.pool.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s: %w", what, err)
	}
	return n, nil
}

// pendingInSlot counts the outbox rows the relay has not confirmed: the inserts a peek at the
// slot decodes past its confirmed position (the publication holds only the outbox, inserts
// only). cdc-relay run marks nothing in the table; this is what a restarted relay would send.
// A peek needs the slot idle: while the relay runs, it reports that instead.
func (s *service) pendingInSlot(ctx context.Context, slot, publication string) (int64, error) {
	var active bool
	if err := s.pool.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("no replication slot %s (run db-init)", slot)
		}
		return 0, fmt.Errorf("read slot %s: %w", slot, err)
	}
	if active {
		return 0, fmt.Errorf("slot %s is in use by a running relay: stop it to count the pending rows (cdc-relay slot status shows its lag)", slot)
	}
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
		'proto_version', '1', 'publication_names', $2) WHERE get_byte(data, 0) = ascii('I')`, slot, publication).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("peek at slot %s: %w", slot, err)
	}
	return n, nil
}

// waitPending waits until the polling publisher has marked every outbox row.
func (s *service) waitPending(ctx context.Context, timeout time.Duration) error {
	return waitUntil(ctx, timeout, "outbox rows still pending", func() (bool, string, error) {
		n, err := s.count(ctx, "pending")
		return n == 0, fmt.Sprintf("%d pending", n), err
	})
}

// waitConfirmed waits until the slot has confirmed the WAL position current at the call: by
// the relay's invariant, every outbox row committed before the call is then in Kafka.
func (s *service) waitConfirmed(ctx context.Context, slot string, timeout time.Duration) error {
	if slot == "" {
		return errors.New("wait-confirmed needs --slot")
	}
	var text string
	if err := s.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&text); err != nil {
		return err
	}
	target, err := pglogrepl.ParseLSN(text)
	if err != nil {
		return err
	}
	return waitUntil(ctx, timeout, "slot "+slot+" to confirm "+target.String(), func() (bool, string, error) {
		var c *string
		if err := s.pool.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&c); err != nil {
			return false, "", fmt.Errorf("read slot %s: %w", slot, err)
		}
		if c == nil {
			return false, "no confirmed position", nil
		}
		lsn, err := pglogrepl.ParseLSN(*c)
		return err == nil && lsn >= target, "confirmed " + *c, err
	})
}

// waitUntil polls cond until it holds. Errors (PostgreSQL restarting) are retried until the
// timeout, then reported.
func waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, state, err := cond()
		if ok && err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, err)
			}
			return fmt.Errorf("timed out after %s waiting for %s (%s)", timeout, what, state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
