package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/schema"
	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// crashEnv names the fault-injection hook: the process kills itself with SIGKILL right after
// Kafka acknowledged the Nth transaction batch and before that position reaches PostgreSQL.
// For tests only.
const crashEnv = "CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS"

// cmdRun streams: flags, then the relay built (not started), metrics and health served,
// the preflight over a normal connection, and the stream until ctx ends.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	var f runFlags
	fs := newFlagSet("run", "run --pg-url URL --brokers HOST:PORT[,..] --slot NAME --publication NAME [flags]", stderr)
	f.register(fs)
	groupFlags(fs, runFlagGroups)
	if err := f.parse(fs, args); err != nil {
		return err
	}
	log := f.c.logger(stderr)
	// A SIGTERM or Ctrl-C before streaming starts is a clean stop like one after it (exit 0):
	// nothing was published, nothing confirmed. The checks it interrupted fail with the canceled
	// context, which is not an error of the relay's (a supervisor would count it as a crash).
	streaming := false
	defer func() {
		if err != nil && !streaming && ctx.Err() != nil {
			log.Info("stopped during startup, before streaming: nothing was published or confirmed", "interrupted", err)
			err = nil
		}
	}()
	rcfg, enc, err := f.buildRunConfig(ctx, fs, log)
	if err != nil {
		return err
	}
	reg, stop, err := instrument(ctx, &rcfg, enc, log)
	if err != nil {
		return err
	}
	defer stop() // after Run: its drain ends the last spans
	r, err := relay.New(rcfg)
	if err != nil {
		return &usageError{err}
	}
	// Health and metrics first: while the relay waits for PostgreSQL or Kafka below, /healthz
	// answers and /readyz says what it waits for.
	stopOps, err := f.ops.startRun(ctx, reg, r, &f.c, log)
	if err != nil {
		return err
	}
	defer stopOps()
	if ok, err := f.preflight(ctx, fs, log); !ok || err != nil {
		return err // ok false, err nil: stopped while waiting
	}
	if ok, err := f.awaitGeneration(ctx, log); !ok || err != nil {
		return err // ok false, err nil: stopped while waiting
	}
	log.Info("starting", "slot", f.c.slot, "publications", []string(f.pubs), "brokers", []string(f.prod.brokers))
	streaming = true
	if err := r.Run(ctx); err != nil {
		return schemaStopErr(checkpointTopicErr(f.prod.topicErr(fmt.Errorf("run: %w", err))))
	}
	return nil
}

// instrument gives rcfg its tracing (OTEL_* variables), its metrics and the schema encoder's,
// and returns the registry to serve and what stops the tracing once the relay has stopped.
func instrument(ctx context.Context, rcfg *relay.Config, enc *schema.Encoder, log *slog.Logger) (*prometheus.Registry, func(), error) {
	stop, err := traceSink(ctx, &rcfg.Sink, log)
	if err != nil {
		return nil, nil, err
	}
	reg := metrics.NewRegistry("run", version)
	rcfg.Metrics = metrics.NewRelay(reg)
	if enc != nil {
		rcfg.Schema = &relay.Schema{Encoder: enc, Metrics: metrics.NewSchema(reg)}
	}
	rcfg.Sink.Opts = append(rcfg.Sink.Opts, kgo.WithHooks(rcfg.Metrics.KafkaHooks()))
	return reg, stop, nil
}

// runFlags are run's flags and what they fill in.
type runFlags struct {
	c            common
	pubs, tables listFlag
	dcfg         decoder.Config
	scfg         sink.Config
	rcfg         relay.Config
	interval     time.Duration
	confirmDelay time.Duration
	recvTimeout  time.Duration
	ops          opsFlags
	prod         producerFlags
	delivery     deliveryFlags
	prof         profileFlags
	values       valueFlags
	stopAt       stopAtFlag
	shard        shardFlag
}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.c.register(fs)
	fs.Var(&f.pubs, "publication", "publication(s) to stream, comma-separated")
	f.prod.register(fs, &f.rcfg.DLQTopic)
	fs.Var(&f.tables, "table", "only publish rows of these tables, schema.table, comma-separated (default: every table in the publication)")
	fs.StringVar(&f.dcfg.Topic, "topic", "", "publish every event to this topic instead of the row's topic column")
	fs.StringVar(&f.rcfg.DeadLetterTable, "dead-letter-table", deadletters.DefaultTable, deadLetterTableUsage)
	fs.StringVar(&f.dcfg.MessagePrefix, "message-prefix", "outbox", "prefix of pg_logical_emit_message events to publish")
	registerColumns(fs, &f.dcfg.Columns)
	registerNullPayload(fs, &f.dcfg.NullPayload)
	f.prof.register(fs)
	fs.DurationVar(&f.interval, "status-interval", 10*time.Second, "how often a status update is sent to PostgreSQL when nothing new was confirmed (the heartbeat)")
	fs.DurationVar(&f.confirmDelay, "confirm-delay", 100*time.Millisecond, "how soon after Kafka acknowledged a transaction its position is sent to PostgreSQL: what a kill -9 replays (negative: only every --status-interval)")
	fs.DurationVar(&f.recvTimeout, "receive-timeout", 60*time.Second, "end the replication session and reconnect when nothing arrived from PostgreSQL for this long (a silent network; like wal_receiver_timeout); the relay asks the server to reply at least twice within it")
	fs.IntVar(&f.scfg.BatchMaxBytes, "batch-max-bytes", sink.DefaultBatchMaxBytes, "largest record batch; each topic's batches are also capped at its max.message.bytes")
	fs.IntVar(&f.scfg.MaxBufferedRecords, "max-buffered-records", 10_000, "records the producer may hold before reading pauses")
	fs.IntVar(&f.scfg.MaxBufferedBytes, "max-buffered-bytes", 32<<20, "bytes the producer may hold before reading pauses")
	fs.DurationVar(&f.scfg.Linger, "linger", 0, "how long a partition waits for more records before sending: 0 sends each record at once (at a steady load, most records in a produce request of their own); a linger sends fewer, fuller requests for up to that much latency more, and one under 1ms costs about as much as 1ms (docs/benchmark.md)")
	fs.StringVar(&f.scfg.ClientID, "kafka-client-id", "cdc-relay", "Kafka client id")
	fs.DurationVar(&f.rcfg.StartupTimeout, "kafka-timeout", 10*time.Second, "how long each attempt to reach Kafka at startup waits before the relay warns and tries again (it waits as long as it takes)")
	fs.DurationVar(&f.rcfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a stop waits, from the signal, for Kafka to acknowledge what it holds (and for an exactly-once commit in flight)")
	f.delivery.register(fs)
	f.values.register(fs)
	f.ops.registerMetrics(fs)
	f.ops.registerSlot(fs)
	f.stopAt.register(fs)
	f.shard.register(fs, "stream the shard's slot and publications, <slot>_s<I>of<N> and <publication>_s<I>of<N> (made by slot create --shards N), "+
		"so the transactional id, the hold on the slot and the metrics are the shard's")
}

// parse reads the flags and twins and checks what needs no service (usage errors, exit 2).
func (f *runFlags) parse(fs *flag.FlagSet, args []string) error {
	if err := f.ops.parse(fs, args, f.c.validate); err != nil {
		return err
	}
	if len(f.pubs) == 0 {
		return usageErr("--publication is required (or set CDC_RELAY_PUBLICATION)")
	}
	if err := f.shard.applyRun(&f.c, &f.pubs, &f.dcfg); err != nil {
		return err
	}
	if err := f.prof.apply(fs, &f.dcfg); err != nil {
		return err
	}
	if err := checkRanges(fs, []string{"status-interval", "slot-status-interval", "kafka-timeout", "shutdown-timeout",
		"max-buffered-records", "max-buffered-bytes"}, []string{"linger"}); err != nil {
		return err
	}
	if b := f.scfg.BatchMaxBytes; b < 512 || b > 1<<30 {
		return usageErr("--batch-max-bytes %d: use 512 to 1073741824 (1 GiB); each topic's max.message.bytes caps it further", b)
	}
	if f.recvTimeout <= 0 {
		return usageErr("--receive-timeout must be positive (default 60s): without it a network that goes silent with the connection open leaves the relay waiting for good")
	}
	if _, err := outbox.ParseTable(f.rcfg.DeadLetterTable); err != nil {
		return &usageError{fmt.Errorf("--dead-letter-table: %w", err)}
	}
	return f.stopAt.parse()
}

// buildRunConfig puts the parsed flags into the relay's configuration, checking the groups
// that need the logger or one another (the producer's, the delivery's, the values'), and the
// schema registry when a value format needs one (enc: nil for json).
func (f *runFlags) buildRunConfig(ctx context.Context, fs *flag.FlagSet, log *slog.Logger) (rcfg relay.Config, enc *schema.Encoder, err error) {
	rcfg = f.rcfg
	f.dcfg.Tables = f.tables
	if err := f.prod.sink(&f.scfg, &f.c, fs, log, f.dcfg.Topic); err != nil {
		return rcfg, nil, err
	}
	if rcfg.ExactlyOnce, err = f.delivery.config(fs, rcfg.DLQTopic, f.dcfg.Topic); err != nil {
		return rcfg, nil, err
	}
	if enc, err = f.values.apply(fs, f.prod.format, &f.scfg); err != nil {
		return rcfg, nil, err
	}
	if err := f.values.schema.check(ctx, enc, f.dcfg.Topic, log); err != nil {
		return rcfg, nil, err
	}
	rcfg.Decoder, rcfg.Sink, rcfg.Logger, rcfg.StopAt = f.dcfg, f.scfg, log, f.stopAt.lsn
	rcfg.Replication = replication.Config{
		Conn: f.c.pg, Slot: f.c.slot, Publications: f.pubs,
		StatusInterval: f.interval, ConfirmDelay: f.confirmDelay, ReceiveTimeout: f.recvTimeout, Logger: log,
		OnDrain: newDrainProcs(os.Getenv, log),
	}
	crash, err := crashHook(crashEnv, log, "after Kafka acknowledged, before the position is confirmed")
	if err != nil {
		return rcfg, nil, err
	}
	if crash != nil {
		rcfg.BeforeConfirm = func(lsn pglogrepl.LSN) { crash("lsn", lsn) }
	}
	if err := rcfg.Validate(); err != nil {
		return rcfg, nil, &usageError{err}
	}
	return rcfg, enc, nil
}

// preflight checks that what answers at --brokers is Kafka if anything, then, over a normal
// connection, wal_level, the slot and the publications, the
// --table filter and the column mapping, with errors that say what to fix, before anything
// streams. An unreachable server is waited for; ok is false (with a nil error) when ctx ended
// while waiting.
func (f *runFlags) preflight(ctx context.Context, fs *flag.FlagSet, log *slog.Logger) (ok bool, err error) {
	if err := probeNotKafka(ctx, f.scfg.Brokers, f.scfg.Opts); err != nil {
		return false, err
	}
	conn, err := waitForPG(ctx, &f.c, log)
	if err != nil || conn == nil {
		return false, err
	}
	defer func() { conn.Close(context.Background()) }()
	var published []string
	for i, p := range f.pubs {
		st, err := slotstore.New(conn).CheckRun(ctx, f.c.slot, p)
		if err != nil {
			if errors.Is(err, slotstore.ErrSlotMissing) {
				if tl, terr := slotstore.Timeline(ctx, &f.c.pg.Config, f.c.pgTimeout); terr == nil && tl > 1 {
					return false, promotedSlotAdvice(ctx, &f.c, f.c.slot, f.pubs, f.tables, tl)
				}
			}
			return false, f.shard.explain(slotErr(err))
		}
		if st.Publication != nil {
			published = append(published, st.Publication.Tables...)
			warnPublishesMore(log, st.Publication)
		}
		if i == 0 {
			failoverPreflight(ctx, conn, st, log)
		}
	}
	if err := checkTables(f.tables, published, f.pubs); err != nil {
		return false, err
	}
	if err := f.shard.checkPublications(ctx, conn, f.pubs, f.dcfg.Columns.WithDefaults().AggregateID, f.dcfg.MessagePrefix, log); err != nil {
		return false, err
	}
	streamed := published
	if len(f.tables) > 0 {
		streamed = nil
		for _, t := range f.tables {
			tb, _ := outbox.ParseTable(t) // checked by checkTables
			streamed = append(streamed, tb.String())
		}
	}
	have, err := slotstore.New(conn).Columns(ctx, streamed)
	if err == nil {
		err = checkPayloadTypes(ctx, conn, streamed, f.dcfg.Columns.WithDefaults().Payload)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return false, err // the payload column's type: exit 2
	}
	if err != nil {
		return false, fmt.Errorf("run: %w", err)
	}
	given := func(name string) bool { return isSet(fs, name) }
	if err := checkColumns(have, streamed, f.dcfg.Columns, cmp.Or(f.dcfg.Topic, f.dcfg.TopicTemplate), given); err != nil {
		return false, f.prof.explain(err)
	}
	if err := checkTemplateColumns(have, streamed, f.dcfg.TopicTemplate); err != nil {
		return false, f.prof.explain(err)
	}
	return true, nil
}
