package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/poller"
	"github.com/cdc-relay/cdc-relay/sink"
)

// pollCrashEnv names the poller's fault-injection hook: the process kills itself with SIGKILL
// right after Kafka acknowledged the Nth batch (with --delivery exactly-once: committed its
// transaction) and before its rows are marked published. For tests only.
const pollCrashEnv = "CDC_RELAY_TEST_CRASH_AFTER_BATCHES"

// pollCrash arms pollCrashEnv's hook on the poller's config (poll's and cutover's).
func pollCrash(cfg *poller.Config, log *slog.Logger) error {
	crash, err := crashHook(pollCrashEnv, log, "after Kafka acknowledged (or committed) a batch, before its rows are marked")
	if err != nil {
		return err
	}
	if crash != nil {
		cfg.BeforeCommit = func(rows int) { crash("rows", rows) }
	}
	return nil
}

// pollDelivery is poll's --delivery group: at least once (the default), or one Kafka
// transaction per batch (poller.ExactlyOnce) with the transactional id and checkpoint topic.
// The flags are run's names for the same things.
type pollDelivery struct {
	mode            string
	transactionalID string
	checkpointTopic string
}

func (d *pollDelivery) register(fs *flag.FlagSet) {
	fs.StringVar(&d.mode, "delivery", deliveryAtLeastOnce, "at-least-once (rows marked after Kafka's acknowledgements; a crash publishes the batch in flight again) or exactly-once "+
		"(one Kafka transaction per batch, whose checkpoint names its rows, committed before they are marked: read_committed consumers see each row once; one poller per table)")
	fs.StringVar(&d.transactionalID, "transactional-id", "", "with --delivery exactly-once: the producer's transactional.id; a poller started with it fences the one that had it, which exits 1 (default cdc-relay-poll-<schema>.<table>)")
	fs.StringVar(&d.checkpointTopic, "checkpoint-topic", kafkatxn.DefaultCheckpointTopic, "with --delivery exactly-once: the compacted topic of the checkpoints, shared with run's (created if missing)")
}

// apply checks the group against cfg (parsed flags) and sets cfg.ExactlyOnce. Errors are usage
// errors that name the flags, worded as run's --delivery group words them.
func (d *pollDelivery) apply(fs *flag.FlagSet, cfg *poller.Config) error {
	if eo, err := deliveryMode(fs, d.mode, []string{"transactional-id", "checkpoint-topic"}); !eo || err != nil {
		return err
	}
	errs := checkpointFlagErrs(fs, d.checkpointTopic, strings.TrimSpace(d.transactionalID), "cdc-relay-poll-<schema>.<table>", []string{cfg.Topic, cfg.DLQTopic})
	if cfg.AckTimeout > poller.MaxAckTimeout {
		errs = append(errs, fmt.Errorf("--ack-timeout %s: with --delivery exactly-once a batch's Kafka transaction waits --ack-timeout for the acknowledgements and as long for the commit, "+
			"and Kafka aborts it after %s: use at most %s", cfg.AckTimeout, kafkatxn.DefaultTransactionTimeout, poller.MaxAckTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return &usageError{err}
	}
	cfg.ExactlyOnce = &poller.ExactlyOnce{TransactionalID: d.transactionalID, CheckpointTopic: d.checkpointTopic}
	return nil
}

const pollSynopsis = "poll --pg-url URL --brokers HOST:PORT[,..] [--table public.outbox] [--interval 100ms] [--batch 100] [--delivery exactly-once] [flags]\n" +
	"       cdc-relay poll --create-index --pg-url URL [--table public.outbox]"

func cmdPoll(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		c           common
		cfg         poller.Config
		createIndex bool
		kafkaWait   time.Duration
		prod        producerFlags
		delivery    pollDelivery
		values      valueFlags
		shard       shardFlag
	)
	cols := &cfg.Columns
	var ops opsFlags
	fs := newFlagSet("poll", pollSynopsis, stderr)
	c.registerNoSlot(fs)
	prod.register(fs, &cfg.DLQTopic)
	fs.StringVar(&cfg.Table, "table", outbox.DefaultTable, "outbox table, schema.table")
	fs.StringVar(&cfg.Topic, "topic", "", "publish every row to this topic instead of the row's topic column")
	fs.DurationVar(&cfg.Interval, "interval", 100*time.Millisecond, "time between the starts of two cycles; after a full batch the next cycle starts at once")
	fs.IntVar(&cfg.Batch, "batch", 100, "rows per cycle (one transaction)")
	fs.BoolVar(&createIndex, "create-index", false, "create the partial index on pending rows (CREATE INDEX CONCURRENTLY IF NOT EXISTS <table>_pending_idx ON <table> (id) WHERE published_at IS NULL) and exit")
	delivery.register(fs)
	values.register(fs)
	registerColumns(fs, cols)
	registerNullPayload(fs, &cfg.NullPayload)
	fs.StringVar(&cols.CreatedAt, "column-created-at", "created_at", "creation time column (becomes cdc-commit-time)")
	fs.StringVar(&cols.PublishedAt, "column-published-at", "published_at", "publication time column (NULL means pending)")
	fs.DurationVar(&cfg.AckTimeout, "ack-timeout", 10*time.Second, "how long a cycle waits for Kafka's acknowledgements before it rolls back and treats Kafka as unavailable")
	fs.DurationVar(&cfg.ProbeTimeout, "probe-timeout", 2*time.Second, "how long the probe of an unavailable Kafka waits for an answer")
	fs.IntVar(&cfg.Sink.MaxBufferedBytes, "max-buffered-bytes", 32<<20, "bytes the producer may hold")
	fs.DurationVar(&cfg.Sink.Linger, "linger", 0, "how long a partition waits for more records before sending")
	fs.StringVar(&cfg.Sink.ClientID, "kafka-client-id", "cdc-relay-poll", "Kafka client id")
	fs.DurationVar(&kafkaWait, "kafka-timeout", 10*time.Second, "how long to wait for PostgreSQL and Kafka to answer at startup")
	ops.registerMetrics(fs)
	ops.registerPending(fs)
	shard.register(fs, "poll only the rows of that shard, those whose key column hashes to I as in the publication of slot create --shards N; "+
		"the default --transactional-id is the shard's")
	if err := ops.parse(fs, args, c.validateNoSlot); err != nil {
		return err
	}
	if err := shard.parse(); err != nil {
		return err
	}
	cfg.Shard = shard.shard
	if createIndex {
		return pollCreateIndex(ctx, &c, cfg, stdout)
	}
	log := c.logger(stderr)
	cfg.Conn, cfg.Logger = c.pg, log
	if err := prod.sink(&cfg.Sink, &c, fs, log, cfg.Topic); err != nil {
		return err
	}
	if cfg.Batch < 1 {
		return usageErr("--batch %d: use a positive number of rows", cfg.Batch)
	}
	if cfg.Interval <= 0 {
		return usageErr("--interval %s: use a positive duration", cfg.Interval)
	}
	if err := checkRanges(fs, []string{"ack-timeout", "probe-timeout", "max-buffered-bytes", "kafka-timeout", "pending-interval"}, []string{"linger"}); err != nil {
		return err
	}
	if err := delivery.apply(fs, &cfg); err != nil {
		return err
	}
	enc, err := values.apply(fs, prod.format, &cfg.Sink)
	if err != nil {
		return err
	}
	if err := values.schema.check(ctx, enc, cfg.Topic, log); err != nil {
		return err
	}
	if err := pollCrash(&cfg, log); err != nil {
		return err
	}
	stopTrace, err := traceSink(ctx, &cfg.Sink, log)
	if err != nil {
		return err
	}
	defer stopTrace() // after Run: the last batch's spans end before it returns
	reg := metrics.NewRegistry("poll", version)
	cfg.Metrics = metrics.NewPoller(reg)
	if enc != nil {
		cfg.Schema = &poller.Schema{Encoder: enc, Metrics: metrics.NewSchema(reg)}
	}
	p, err := poller.New(cfg)
	if err != nil {
		return &usageError{err}
	}
	if err := probeNotKafka(ctx, cfg.Sink.Brokers, cfg.Sink.Opts); err != nil {
		p.Close()
		return err
	}
	if err := p.Check(ctx, kafkaWait); err != nil {
		p.Close()
		if ctx.Err() != nil {
			return nil
		}
		return prod.topicErr(pollErr(err))
	}
	stopOps, err := ops.startPoll(ctx, reg, p, cfg, log)
	if err != nil {
		return err
	}
	defer stopOps()
	log.Info("polling", "table", cfg.Table, "shard", shard.text, "interval", cfg.Interval, "batch", cfg.Batch, "delivery", delivery.mode, "brokers", []string(prod.brokers))
	if err := p.Run(ctx); err != nil {
		return schemaStopErr(fmt.Errorf("poll: %w", pollErr(err)))
	}
	return nil
}

// pollCreateIndex is `cdc-relay poll --create-index`.
func pollCreateIndex(ctx context.Context, c *common, cfg poller.Config, stdout io.Writer) error {
	conn, err := connectPG(ctx, c)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	name, created, err := poller.CreateIndex(ctx, conn, cfg.Table, cfg.Columns)
	if err != nil {
		return pollErr(err)
	}
	if created {
		fmt.Fprintf(stdout, "created index %s on %s (pending rows)\n", name, cfg.Table)
	} else {
		fmt.Fprintf(stdout, "index %s on %s already exists: nothing to do\n", name, cfg.Table)
	}
	return nil
}

// pollErr turns the poller's configuration findings into usage errors (exit 2).
func pollErr(err error) error {
	if errors.Is(err, poller.ErrNoTable) || errors.Is(err, poller.ErrMissingColumn) || errors.Is(err, poller.ErrPayloadType) || errors.Is(err, sink.ErrNoBrokers) ||
		errors.Is(err, poller.ErrCheckpointOfAnotherTable) || errors.Is(err, poller.ErrCheckpointTooLarge) || errors.As(err, new(*kafkatxn.NotCompactedError)) {
		return &usageError{err}
	}
	return err
}
