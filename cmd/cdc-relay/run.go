package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// crashEnv names the fault-injection hook: the process kills itself with SIGKILL right after
// Kafka acknowledged the Nth transaction batch and before that position reaches PostgreSQL.
// For tests only.
const crashEnv = "CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS"

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	var (
		c            common
		pubs         listFlag
		tables       listFlag
		dcfg         decoder.Config
		scfg         sink.Config
		rcfg         relay.Config
		interval     time.Duration
		confirmDelay time.Duration
		recvTimeout  time.Duration
		ops          opsFlags
		prod         producerFlags
		delivery     deliveryFlags
		values       valueFlags
	)
	fs := newFlagSet("run", "run --pg-url URL --brokers HOST:PORT[,..] --slot NAME --publication NAME [flags]", stderr)
	c.register(fs)
	fs.Var(&pubs, "publication", "publication(s) to stream, comma-separated")
	prod.register(fs, &rcfg.DLQTopic)
	fs.Var(&tables, "table", "only publish rows of these tables, schema.table, comma-separated (default: every table in the publication)")
	fs.StringVar(&dcfg.Topic, "topic", "", "publish every event to this topic instead of the row's topic column")
	fs.StringVar(&rcfg.DeadLetterTable, "dead-letter-table", deadletters.DefaultTable, deadLetterTableUsage)
	fs.StringVar(&dcfg.MessagePrefix, "message-prefix", "outbox", "prefix of pg_logical_emit_message events to publish")
	registerColumns(fs, &dcfg.Columns)
	fs.DurationVar(&interval, "status-interval", 10*time.Second, "how often a status update is sent to PostgreSQL when nothing new was confirmed (the heartbeat)")
	fs.DurationVar(&confirmDelay, "confirm-delay", 100*time.Millisecond, "how soon after Kafka acknowledged a transaction its position is sent to PostgreSQL: what a kill -9 replays (negative: only every --status-interval)")
	fs.DurationVar(&recvTimeout, "receive-timeout", 60*time.Second, "end the replication session and reconnect when nothing arrived from PostgreSQL for this long (a silent network; like wal_receiver_timeout); the relay asks the server to reply at least twice within it")
	fs.IntVar(&scfg.BatchMaxBytes, "batch-max-bytes", sink.DefaultBatchMaxBytes, "largest record batch; each topic's batches are also capped at its max.message.bytes")
	fs.IntVar(&scfg.MaxBufferedRecords, "max-buffered-records", 10_000, "records the producer may hold before reading pauses")
	fs.IntVar(&scfg.MaxBufferedBytes, "max-buffered-bytes", 32<<20, "bytes the producer may hold before reading pauses")
	fs.DurationVar(&scfg.Linger, "linger", 0, "how long a partition waits for more records before sending")
	fs.StringVar(&scfg.ClientID, "kafka-client-id", "cdc-relay", "Kafka client id")
	fs.DurationVar(&rcfg.StartupTimeout, "kafka-timeout", 10*time.Second, "how long each attempt to reach Kafka at startup waits before the relay warns and tries again (it waits as long as it takes)")
	fs.DurationVar(&rcfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a stop waits, from the signal, for Kafka to acknowledge what it holds (and for an exactly-once commit in flight)")
	delivery.register(fs)
	values.register(fs)
	ops.registerMetrics(fs)
	ops.registerSlot(fs)
	if err := ops.parse(fs, args, c.validate); err != nil {
		return err
	}
	if len(pubs) == 0 {
		return usageErr("--publication is required (or set CDC_RELAY_PUBLICATION)")
	}
	if err := checkRanges(fs, []string{"status-interval", "slot-status-interval", "kafka-timeout", "shutdown-timeout",
		"max-buffered-records", "max-buffered-bytes"}, []string{"linger"}); err != nil {
		return err
	}
	if b := scfg.BatchMaxBytes; b < 512 || b > 1<<30 {
		return usageErr("--batch-max-bytes %d: use 512 to 1073741824 (1 GiB); each topic's max.message.bytes caps it further", b)
	}
	if recvTimeout <= 0 {
		return usageErr("--receive-timeout must be positive (default 60s): without it a network that goes silent with the connection open leaves the relay waiting for good")
	}
	if _, err := outbox.ParseTable(rcfg.DeadLetterTable); err != nil {
		return &usageError{fmt.Errorf("--dead-letter-table: %w", err)}
	}
	log := c.logger(stderr)
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
	dcfg.Tables = tables
	if err := prod.sink(&scfg, &c, fs, log, dcfg.Topic); err != nil {
		return err
	}
	if rcfg.ExactlyOnce, err = delivery.config(fs, rcfg.DLQTopic, dcfg.Topic); err != nil {
		return err
	}
	enc, err := values.apply(fs, prod.format, &scfg)
	if err != nil {
		return err
	}
	if err := values.schema.check(ctx, enc, dcfg.Topic, log); err != nil {
		return err
	}
	rcfg.Decoder, rcfg.Sink, rcfg.Logger = dcfg, scfg, log
	rcfg.Replication = replication.Config{
		Conn: c.pg, Slot: c.slot, Publications: pubs,
		StatusInterval: interval, ConfirmDelay: confirmDelay, ReceiveTimeout: recvTimeout, Logger: log,
		OnDrain: newDrainProcs(os.Getenv, log),
	}
	crash, err := crashHook(crashEnv, log, "after Kafka acknowledged, before the position is confirmed")
	if err != nil {
		return err
	}
	if crash != nil {
		rcfg.BeforeConfirm = func(lsn pglogrepl.LSN) { crash("lsn", lsn) }
	}
	if err := rcfg.Validate(); err != nil {
		return &usageError{err}
	}
	tp, err := startTracing(ctx, os.Getenv, log)
	if err != nil {
		return err
	}
	defer stopTracing(tp, log) // after Run: its drain ends the last spans
	if tp != nil {
		rcfg.Sink.Tracing = tp
	}
	reg := metrics.NewRegistry("run", version)
	rcfg.Metrics = metrics.NewRelay(reg)
	if enc != nil {
		rcfg.Schema = &relay.Schema{Encoder: enc, Metrics: metrics.NewSchema(reg)}
	}
	rcfg.Sink.Opts = append(rcfg.Sink.Opts, kgo.WithHooks(rcfg.Metrics.KafkaHooks()))
	r, err := relay.New(rcfg)
	if err != nil {
		return &usageError{err}
	}
	// Health and metrics first: while the relay waits for PostgreSQL or Kafka below, /healthz
	// answers and /readyz says what it waits for.
	stopOps, err := ops.startRun(ctx, reg, r, &c, log)
	if err != nil {
		return err
	}
	defer stopOps()

	// Preflight over a normal connection: wal_level, slot and publication, with errors that
	// say what to fix, before anything streams. An unreachable server is waited for.
	conn, err := waitForPG(ctx, &c, log)
	if err != nil || conn == nil {
		return err // nil: stopped while waiting
	}
	var published []string
	for i, p := range pubs {
		var st slotstore.Status
		if st, err = slotstore.New(conn).CheckRun(ctx, c.slot, p); err != nil {
			break
		}
		if st.Publication != nil {
			published = append(published, st.Publication.Tables...)
		}
		if i == 0 {
			failoverPreflight(ctx, conn, st, log)
		}
	}
	if err != nil {
		conn.Close(context.Background())
		if errors.Is(err, slotstore.ErrSlotMissing) {
			if tl, terr := serverTimeline(ctx, &c); terr == nil && tl > 1 {
				return promotedSlotMissing(c.slot, pubs, tables, tl)
			}
		}
		return slotErr(err)
	}
	if err := checkTables(tables, published, pubs); err != nil {
		conn.Close(context.Background())
		return err
	}
	streamed := published
	if len(tables) > 0 {
		streamed = nil
		for _, t := range tables {
			tb, _ := outbox.ParseTable(t) // checked by checkTables
			streamed = append(streamed, tb.String())
		}
	}
	have, err := slotstore.New(conn).Columns(ctx, streamed)
	conn.Close(context.Background())
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if err := checkColumns(have, streamed, dcfg.Columns, dcfg.Topic, func(name string) bool { return isSet(fs, name) }); err != nil {
		return err
	}
	log.Info("starting", "slot", c.slot, "publications", []string(pubs), "brokers", []string(prod.brokers))
	streaming = true
	if err := r.Run(ctx); err != nil {
		return schemaStopErr(checkpointTopicErr(prod.topicErr(fmt.Errorf("run: %w", err))))
	}
	return nil
}
