// Command outbox-demo plays the order-service of the seed documents against a running
// cdc-relay: it writes orders, each an orders row and an outbox row in one transaction,
// reads the topic back, and reports what arrived and how fast.
//
//	outbox-demo setup  --pg-url URL --brokers B --topic T      create tables and the topic
//	outbox-demo orders --pg-url URL --brokers B --topic T --count N [--rate R] [--warmup W]
//
// orders first writes W warm-up orders one at a time, each read back before the next, and
// reports their latencies apart: the first records of a fresh relay, broker and consumer pay
// for connections, metadata, the producer's id and the first fetch (85 ms p50 on a fresh
// machine), which is not the commit-to-consumer latency of a running pipeline. It exits 1 if
// any committed outbox row, warm-up or measured, did not reach the topic.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/tools/internal/demo"
)

var schema = demo.OrdersTables("orders", "outbox")

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: outbox-demo setup|orders [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	pgURL := fs.String("pg-url", os.Getenv("CDC_RELAY_PG_URL"), "PostgreSQL URL")
	brokers := fs.String("brokers", os.Getenv("CDC_RELAY_BROKERS"), "Kafka brokers")
	topic := fs.String("topic", "demo.orders.v1", "topic the outbox rows name")
	count := fs.Int("count", 100, "orders to write")
	rate := fs.Int("rate", 200, "orders per second")
	warmup := fs.Int("warmup", 20, "warm-up orders, written and read back one at a time before the measured ones and reported apart")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for every record")
	_ = fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "setup":
		err = setup(ctx, *pgURL, *brokers, *topic)
	case "orders":
		if *warmup < 0 || *count < 0 {
			fmt.Fprintln(os.Stderr, "outbox-demo: --count and --warmup must not be negative")
			stop()
			os.Exit(2) //nolint:gocritic // stop() ran just above

		}
		err = orders(ctx, os.Stdout, *pgURL, *brokers, *topic, *count, *warmup, *rate, *timeout)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "outbox-demo:", err)
		os.Exit(1) //nolint:gocritic // exitAfterDefer: the deferred stop only releases the signal handler, as exiting does
	}
}

func setup(ctx context.Context, pgURL, brokers, topic string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, schema); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = demo.CreateTopic(ctx, kadm.NewClient(cl), topic)
	return err
}

func orders(ctx context.Context, out io.Writer, pgURL, brokers, topic string, count, warmup, rate int, timeout time.Duration) error {
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	// Start reading at the topic's current end, so earlier runs do not count.
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	start := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) { start[topic][o.Partition] = kgo.NewOffset().At(o.Offset) })
	cl.AddConsumePartitions(start)

	type rec struct {
		id      string
		latency time.Duration
	}
	got := make(chan rec, 1024)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			fetches := cl.PollFetches(cctx)
			if cctx.Err() != nil {
				return
			}
			now := time.Now()
			fetches.EachRecord(func(r *kgo.Record) {
				var id string
				var commit time.Time
				for _, h := range r.Headers {
					switch h.Key {
					case "outbox-id":
						id = string(h.Value)
					case "cdc-commit-time":
						commit, _ = time.Parse(time.RFC3339Nano, string(h.Value))
					}
				}
				got <- rec{id: id, latency: now.Sub(commit)}
			})
		}
	}()

	// order writes order i: an orders row and its outbox row in one transaction.
	order := func(i int) (string, error) {
		var id int64
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var orderID int64
			if err := tx.QueryRow(ctx, `INSERT INTO orders (customer_id, amount) VALUES ($1, $2) RETURNING id`,
				fmt.Sprintf("customer-%d", i%17), 10+i%90).Scan(&orderID); err != nil {
				return fmt.Errorf("INSERT orders: %w", err)
			}
			payload, _ := json.Marshal(map[string]any{"order_id": orderID, "customer_id": fmt.Sprintf("customer-%d", i%17), "amount": 10 + i%90})
			return tx.QueryRow(ctx, `INSERT INTO outbox (aggregate_id, topic, payload, event_type) VALUES ($1, $2, $3, 'order.created') RETURNING id`,
				fmt.Sprintf("order-%d", orderID), topic, payload).Scan(&id)
		})
		return strconv.FormatInt(id, 10), err
	}

	// The warm-up: one order at a time, each read back before the next.
	var warm []time.Duration
	for i := 0; i < warmup; i++ {
		id, err := order(i)
		if err != nil {
			return err
		}
		deadline := time.After(timeout)
	read:
		for {
			select {
			case r := <-got:
				if r.id == id {
					warm = append(warm, r.latency)
					break read
				}
			case <-deadline:
				return fmt.Errorf("warm-up order %d (outbox id %s) did not reach %s within %s", i+1, id, topic, timeout)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if len(warm) > 0 {
		first := warm[0]
		slices.Sort(warm)
		fmt.Fprintf(out, "warm-up, %d orders one at a time (cold connections, metadata, first fetch): first %s, p50 %s, max %s\n",
			len(warm), first.Round(10*time.Microsecond), pct(warm, 0.5), warm[len(warm)-1].Round(10*time.Microsecond))
	}

	written := make(map[string]bool, count)
	tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer tick.Stop()
	began := time.Now()
	for i := 0; i < count; i++ {
		<-tick.C
		id, err := order(warmup + i)
		if err != nil {
			return err
		}
		written[id] = true
	}
	fmt.Fprintf(out, "wrote %d orders in %s\n", count, time.Since(began).Round(time.Millisecond))

	seen := make(map[string]int, count)
	var lat []time.Duration
	records := 0
	deadline := time.After(timeout)
wait:
	for len(seen) < len(written) {
		select {
		case r := <-got:
			if !written[r.id] {
				continue
			}
			records++
			if seen[r.id] == 0 {
				lat = append(lat, r.latency)
			}
			seen[r.id]++
		case <-deadline:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	var inTable int64
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&inTable)
	slices.Sort(lat)
	fmt.Fprintf(out, "rows in outbox (this run):      %d measured (+%d warm-up)\n", len(written), len(warm))
	fmt.Fprintf(out, "rows in outbox (whole table):   %d\n", inTable)
	fmt.Fprintf(out, "records on the topic (this run): %d\n", records)
	fmt.Fprintf(out, "distinct outbox ids received:   %d\n", len(seen))
	if len(lat) > 0 {
		fmt.Fprintf(out, "commit-to-consumer latency:     p50 %s  p99 %s  max %s (after the warm-up)\n",
			pct(lat, 0.50), pct(lat, 0.99), lat[len(lat)-1].Round(10*time.Microsecond))
	}
	if missing := len(written) - len(seen); missing > 0 {
		return fmt.Errorf("%d committed outbox rows never reached %s", missing, topic)
	}
	fmt.Fprintln(out, "OK: every committed outbox row reached Kafka")
	return nil
}

func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted)-1) * p)
	return sorted[i].Round(10 * time.Microsecond)
}
