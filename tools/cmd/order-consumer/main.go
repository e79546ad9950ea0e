// Command order-consumer is the order demo's consumer (scripts/seed-demo.sh): it reads the order
// events from Kafka in a consumer group and applies each once through the inbox package (the
// outbox id is recorded in inbox_processed in the same transaction as the effect, a row in
// reservations), so the publisher's duplicates are absorbed. scripts/seed-demo.sh drives it.
//
//	order-consumer run          read until caught up with the topic's end, print INSERT/DUP lines and
//	                            processed=N inserted=N skipped=N
//	order-consumer dup-count    unique events processed (rows in inbox_processed for this consumer)
//	order-consumer end-offsets  records on the topic per partition and in total (duplicates included)
//	order-consumer topic-create [--reset]  create the topic (3 partitions); --reset deletes it and the group first
//
// Flags have environment defaults: --pg-url CDC_RELAY_PG_URL, --brokers CDC_RELAY_BROKERS,
// --schema SEED_SCHEMA (seed_cdc), --topic SEED_TOPIC (brew.orders.v1), --group SEED_GROUP
// (order-consumer). Exit codes: 0 done, 1 failure, 2 bad usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/inbox"
	"github.com/cdc-relay/cdc-relay/tools/internal/demo"
)

func main() {
	cmd, fs := demo.Subcommand("order-consumer", "usage: order-consumer run|dup-count|end-offsets|topic-create [flags]")
	c := &consumer{}
	fs.StringVar(&c.pgURL, "pg-url", os.Getenv("CDC_RELAY_PG_URL"), "PostgreSQL URL")
	brokers := fs.String("brokers", os.Getenv("CDC_RELAY_BROKERS"), "Kafka brokers, comma-separated")
	fs.StringVar(&c.schema, "schema", demo.EnvOr("SEED_SCHEMA", "seed_cdc"), "schema holding inbox_processed and reservations")
	fs.StringVar(&c.topic, "topic", demo.EnvOr("SEED_TOPIC", "brew.orders.v1"), "topic to read")
	fs.StringVar(&c.group, "group", demo.EnvOr("SEED_GROUP", "order-consumer"), "consumer group, also the inbox's consumer name")
	reset := fs.Bool("reset", false, "topic-create: delete the topic and the group first")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long run waits to catch up")
	_ = fs.Parse(os.Args[2:])
	if *brokers == "" || c.pgURL == "" {
		fmt.Fprintln(os.Stderr, "order-consumer: --pg-url and --brokers (or CDC_RELAY_PG_URL, CDC_RELAY_BROKERS) are required")
		os.Exit(2)
	}
	c.brokers = strings.Split(*brokers, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch cmd {
	case "run":
		err = c.run(ctx, *timeout)
	case "dup-count":
		err = c.dupCount(ctx)
	case "end-offsets":
		err = c.endOffsets(ctx)
	case "topic-create":
		err = c.topicCreate(ctx, *reset)
	default:
		fmt.Fprintf(os.Stderr, "order-consumer: unknown command %q\n", cmd)
		os.Exit(2) //nolint:gocritic // exitAfterDefer: the deferred stop only releases the signal handler, as exiting does
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "order-consumer:", err)
		os.Exit(1)
	}
}

type consumer struct {
	pgURL, schema, topic, group string
	brokers                     []string
}

func (c *consumer) admin() (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

func (c *consumer) inbox() (*inbox.Inbox, error) {
	return inbox.New(inbox.Config{Consumer: c.group, Table: c.schema + ".inbox_processed"})
}

// run reads from the group's committed offsets until every partition reaches the end offset
// it had at the start, applying each event once.
func (c *consumer) run(ctx context.Context, timeout time.Duration) error {
	pool, err := pgxpool.New(ctx, c.pgURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	in, err := c.inbox()
	if err != nil {
		return err
	}
	if err := in.CreateTable(ctx, pool); err != nil {
		return err
	}
	adm, closeAdm, err := c.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	ends, err := adm.ListEndOffsets(ctx, c.topic)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", c.topic, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("list end offsets of %s: %w", c.topic, err)
	}
	// Where the group stands: committed offsets, or the start of the log.
	pos := map[int32]int64{}
	starts, err := adm.ListStartOffsets(ctx, c.topic)
	if err != nil {
		return err
	}
	starts.Each(func(o kadm.ListedOffset) { pos[o.Partition] = o.Offset })
	committed, err := adm.FetchOffsets(ctx, c.group)
	if err == nil {
		committed.Each(func(o kadm.OffsetResponse) {
			if o.Topic == c.topic && o.At >= 0 {
				pos[o.Partition] = o.At
			}
		})
	}
	caughtUp := func() bool {
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if pos[o.Partition] < o.Offset {
				done = false
			}
		})
		return done
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(c.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var processed, inserted, skipped int
	deadline := time.Now().Add(timeout)
	for !caughtUp() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not caught up with %s after %s", c.topic, timeout)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("fetch %s: %w", c.topic, ferr)
		}
		var recs []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		for _, r := range recs {
			ran, err := in.Handle(ctx, pool, r, func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
				// The effect: inventory reserved for the order, in the inbox's transaction.
				_, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{c.schema, "reservations"}.Sanitize()+` (order_id, outbox_id) VALUES ($1, $2)`,
					string(r.Key), inbox.OutboxID(r))
				return err
			})
			if err != nil {
				return err
			}
			processed++
			verb := "DUP   "
			if ran {
				inserted++
				verb = "INSERT"
			} else {
				skipped++
			}
			fmt.Printf("%s outbox-id=%s key=%s partition=%d offset=%d\n", verb, inbox.OutboxID(r), r.Key, r.Partition, r.Offset)
			pos[r.Partition] = r.Offset + 1
		}
		if len(recs) > 0 {
			if err := cl.CommitRecords(ctx, recs...); err != nil {
				return fmt.Errorf("commit offsets: %w", err)
			}
		}
	}
	fmt.Printf("processed=%d inserted=%d skipped=%d\n", processed, inserted, skipped)
	return nil
}

func (c *consumer) dupCount(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{c.schema, "inbox_processed"}.Sanitize()+` WHERE consumer = $1`, c.group).Scan(&n)
	if err != nil {
		return fmt.Errorf("count processed events: %w", err)
	}
	fmt.Println(n)
	return nil
}

func (c *consumer) endOffsets(ctx context.Context) error {
	adm, closeAdm, err := c.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	ends, err := adm.ListEndOffsets(ctx, c.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", c.topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, c.topic)
	if err != nil {
		return err
	}
	var total int64
	for _, o := range ends.Offsets().Sorted() {
		s, _ := starts.Lookup(o.Topic, o.Partition)
		fmt.Printf("%s[%d] %d\n", o.Topic, o.Partition, o.At-s.Offset)
		total += o.At - s.Offset
	}
	fmt.Printf("total %d\n", total)
	return nil
}

func (c *consumer) topicCreate(ctx context.Context, reset bool) error {
	adm, closeAdm, err := c.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	if reset {
		if err := deleteGroup(ctx, adm, c.group); err != nil {
			return err
		}
		resp, err := adm.DeleteTopics(ctx, c.topic)
		if err != nil {
			return fmt.Errorf("delete topic %s: %w", c.topic, err)
		}
		if r, ok := resp[c.topic]; ok && r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("delete topic %s: %w", c.topic, r.Err)
		}
	}
	// A topic just deleted may take a moment to go: retry while Kafka says it exists.
	deadline := time.Now().Add(30 * time.Second)
	for {
		created, err := demo.CreateTopic(ctx, adm, c.topic)
		switch {
		case err != nil:
			return err
		case created:
			fmt.Printf("created topic %s (3 partitions)\n", c.topic)
			return nil
		case !reset:
			fmt.Printf("topic %s already exists\n", c.topic)
			return nil
		case time.Now().Before(deadline):
			time.Sleep(200 * time.Millisecond)
		default:
			return fmt.Errorf("create topic %s: %w", c.topic, kerr.TopicAlreadyExists)
		}
	}
}

// deleteGroup deletes a consumer group if it exists. A broker that has just started may not have
// its group coordinator yet (COORDINATOR_NOT_AVAILABLE, a retriable error): retry for a while.
func deleteGroup(ctx context.Context, adm *kadm.Client, group string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := adm.DeleteGroups(ctx, group)
		if err == nil {
			if r, ok := resp[group]; ok && r.Err != nil {
				err = r.Err
			}
		}
		switch {
		case err == nil, errors.Is(err, kerr.GroupIDNotFound):
			return nil
		case kerr.IsRetriable(err) && time.Now().Before(deadline):
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		default:
			return fmt.Errorf("delete group %s: %w", group, err)
		}
	}
}
