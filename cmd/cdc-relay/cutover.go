package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cdc-relay/cdc-relay/cutover"
	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/poller"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

const cutoverSynopsis = "cutover --pg-url URL --brokers HOST:PORT[,..] --slot NAME --publication NAME [--table public.outbox] [--batch 100] [flags]"

const markPublishedSynopsis = "outbox mark-published --pg-url URL --slot NAME --publication NAME [--table public.outbox]"

// cmdCutover is `cdc-relay cutover`: from a polling publisher to the relay. It creates the slot
// with an exported snapshot and publishes the rows pending in that snapshot, as `poll` would.
func cmdCutover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		c         common
		pub       string
		deadTable string
		cfg       poller.Config
		prod      producerFlags
	)
	cols := &cfg.Columns
	fs := newFlagSet("cutover", cutoverSynopsis, stderr)
	c.register(fs)
	fs.StringVar(&pub, "publication", "", "publication to create (insert-only) or extend, as slot create does")
	fs.StringVar(&deadTable, "dead-letter-table", deadletters.DefaultTable, deadLetterTableUsage)
	prod.register(fs, &cfg.DLQTopic)
	fs.StringVar(&cfg.Table, "table", outbox.DefaultTable, "outbox table, schema.table")
	fs.StringVar(&cfg.Topic, "topic", "", "publish every row to this topic instead of the row's topic column")
	fs.IntVar(&cfg.Batch, "batch", 100, "rows per transaction")
	registerColumns(fs, cols)
	fs.StringVar(&cols.CreatedAt, "column-created-at", "created_at", "creation time column (becomes cdc-commit-time)")
	fs.StringVar(&cols.PublishedAt, "column-published-at", "published_at", "publication time column (NULL means pending)")
	fs.DurationVar(&cfg.AckTimeout, "ack-timeout", 10*time.Second, "how long a batch waits for Kafka's acknowledgements before it is rolled back and retried")
	fs.StringVar(&cfg.Sink.ClientID, "kafka-client-id", "cdc-relay-cutover", "Kafka client id")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	if pub == "" {
		return usageErr("--publication is required (or set CDC_RELAY_PUBLICATION)")
	}
	if cfg.Batch < 1 {
		return usageErr("--batch %d: use a positive number of rows", cfg.Batch)
	}
	if err := checkRanges(fs, []string{"ack-timeout"}, nil); err != nil {
		return err
	}
	if _, err := deadletters.TableDDL(deadTable); err != nil {
		return &usageError{fmt.Errorf("--dead-letter-table: %w", err)}
	}
	if err := (slotstore.CreateOptions{Slot: c.slot, Publication: pub, Tables: []string{cfg.Table}}).Validate(); err != nil {
		return &usageError{err}
	}
	log := c.logger(stderr)
	cfg.Conn, cfg.Logger = c.pg, log
	if err := prod.sink(&cfg.Sink, &c, fs, log, cfg.Topic); err != nil {
		return err
	}
	if err := pollCrash(&cfg, log); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return &usageError{err}
	}
	if err := probeNotKafka(ctx, cfg.Sink.Brokers, cfg.Sink.Opts); err != nil {
		return err
	}
	res, err := cutover.Run(ctx, cutover.Options{Slot: c.slot, Publication: pub, DeadLetterTable: deadTable, Poller: cfg, Logger: log})
	if err != nil {
		if errors.Is(err, slotstore.ErrSlotExists) {
			return &usageError{fmt.Errorf("%w: cutover creates the slot; if the relay already runs from it, nothing is left to cut over", err)}
		}
		return prod.topicErr(fmt.Errorf("cutover: %w", pollErr(slotErr(err))))
	}
	if res.PublicationCreated {
		fmt.Fprintf(stdout, "created publication %s (insert only)\n", pub)
	}
	fmt.Fprintf(stdout, "created slot %s (pgoutput) at %s with snapshot %s\n", c.slot, res.ConsistentPoint, res.Snapshot)
	fmt.Fprintf(stdout, "published %d of the %d rows pending in the snapshot (%d dead-lettered; %d marked meanwhile by another publisher)\n",
		res.Published, res.Pending, res.DeadLettered, res.MarkedMeanwhile)
	fmt.Fprintf(stdout, "now start: cdc-relay run --slot %s --publication %s (rows committed after %s are in the slot)\n", c.slot, pub, res.ConsistentPoint)
	return nil
}

// cmdOutboxMarkPublished is `cdc-relay outbox mark-published`: from the relay back to polling.
func cmdOutboxMarkPublished(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		c    common
		pubs listFlag
		o    cutover.MarkOptions
	)
	fs := newFlagSet("outbox mark-published", markPublishedSynopsis, stderr)
	c.register(fs)
	fs.Var(&pubs, "publication", "the relay's publication(s), comma-separated")
	fs.StringVar(&o.Table, "table", outbox.DefaultTable, "outbox table, schema.table")
	registerColumns(fs, &o.Columns)
	fs.StringVar(&o.Columns.PublishedAt, "column-published-at", "published_at", "publication time column the poller reads")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	if len(pubs) == 0 {
		return usageErr("--publication is required (or set CDC_RELAY_PUBLICATION)")
	}
	o.Slot, o.Publications = c.slot, pubs
	conn, err := connectPG(ctx, &c)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	peek, err := connectPG(ctx, &c)
	if err != nil {
		return err
	}
	defer peek.Close(context.Background())
	res, err := cutover.MarkDelivered(ctx, conn, peek, o)
	if err != nil {
		if errors.Is(err, slotstore.ErrSlotMissing) || errors.Is(err, slotstore.ErrSlotActive) {
			return &usageError{err}
		}
		return fmt.Errorf("outbox mark-published: %w", err)
	}
	fmt.Fprintf(stdout, "marked %d rows of %s published: committed before slot %s's confirmed position %s\n", res.Marked, o.Table, c.slot, res.Confirmed)
	fmt.Fprintf(stdout, "left %d rows pending that the slot has not confirmed (committed after %s, up to %s), and every row committed later: the poller publishes them\n",
		res.Undelivered, res.Confirmed, res.MarkLSN)
	return nil
}
