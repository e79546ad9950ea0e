package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/sink"
)

// Config configures a Relay. Zero fields take the defaults stated.
type Config struct {
	Replication replication.Config
	Decoder     decoder.Config
	Sink        sink.Config
	// DLQTopic receives records Kafka rejects for good and rows that cannot become records,
	// with the original key, value and headers plus the error. Default "cdc-relay.dlq".
	DLQTopic string
	// DeadLetterTable is the PostgreSQL table, "schema.table" ("table" means public.table),
	// where a record goes when the dead-letter topic refuses it too; the relay creates it on
	// first use if missing. Default deadletters.DefaultTable.
	DeadLetterTable string
	// Buffer bounds the replication messages waiting between the connection and the
	// producer (they wait in batches of up to replication.MaxBatch). Default 4096.
	Buffer int
	// ShutdownTimeout bounds a stop, from the moment Run's context ends: the final Kafka flush and
	// an exactly-once commit in flight then. Default 30s.
	ShutdownTimeout time.Duration
	// StartupTimeout is how long each attempt to reach Kafka at startup waits before the relay
	// warns and tries again; it waits for Kafka for as long as it takes. Default 10s.
	StartupTimeout time.Duration
	// Logger is the relay's logger. Default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives the latency and produce-error hooks and reads the relay's
	// counters when scraped. Default nil: no metrics.
	Metrics *metrics.Relay
	// BeforeConfirm, when set, runs after Kafka acknowledged a transaction and before its
	// position is handed to the replication stream (in exactly-once mode: after the Kafka
	// commit of a checkpoint, before its position is). Fault-injection tests use it.
	BeforeConfirm func(pglogrepl.LSN)
	// ExactlyOnce, when set, is `run --delivery exactly-once`: a transactional producer that
	// belongs to the slot, the checkpoint in each Kafka transaction, and the position confirmed
	// only from committed checkpoints (exactly.go; DESIGN.md, "Exactly-once"). Nil:
	// at-least-once.
	ExactlyOnce *ExactlyOnce
	// StopAt, when set, is `run --stop-at-lsn`: the relay publishes every transaction whose
	// commit record starts before it and none at or after it, and once the stream passed it and
	// everything before is acknowledged and confirmed, Run returns nil and Reached reports true
	// (stopat.go). Zero: no stop.
	StopAt pglogrepl.LSN
	// Schema, when set, writes each value in a schema registry's wire format (schema.go).
	// Nil: the payload as it is.
	Schema *Schema
}

// ExactlyOnce configures exactly-once delivery. Zero fields take the defaults stated.
type ExactlyOnce struct {
	// TransactionalID is the producer's transactional.id. Default txn.TransactionalID(slot),
	// "cdc-relay-<slot>": two PostgreSQL clusters with slots of one name that publish to one
	// Kafka cluster must set their own (DESIGN.md, "The transactional.id belongs to the slot").
	TransactionalID string
	// CheckpointTopic is the compacted topic of the checkpoints, created at start if missing.
	// Default txn.DefaultCheckpointTopic.
	CheckpointTopic string
	// Interval is how long a Kafka transaction stays open at most before it is committed after
	// the PostgreSQL transaction that is decoded then; one still inside a PostgreSQL
	// transaction at twice the interval is split there. Default DefaultTransactionInterval.
	Interval time.Duration
	// MaxRecords is how many records (dead letters included) a Kafka transaction holds at
	// most: it is committed at that count, inside a PostgreSQL transaction if need be (split).
	// Default DefaultTransactionMaxRecords.
	MaxRecords int
	// TransactionTimeout is the producer's transaction.timeout.ms, after which Kafka aborts
	// an open transaction. Default txn.DefaultTransactionTimeout; it must be more than twice
	// Interval.
	TransactionTimeout time.Duration
}

// The exactly-once defaults.
const (
	DefaultTransactionInterval   = 100 * time.Millisecond
	DefaultTransactionMaxRecords = 10_000
)

// Validate reports a configuration that cannot work.
func (c ExactlyOnce) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Interval < 0:
		return fmt.Errorf("relay: transaction interval %s is negative", c.Interval)
	case c.MaxRecords < 0:
		return fmt.Errorf("relay: transaction max records %d is negative", c.MaxRecords)
	case c.TransactionTimeout < 0:
		return fmt.Errorf("relay: transaction timeout %s is negative", c.TransactionTimeout)
	case 2*c.Interval >= c.TransactionTimeout:
		return fmt.Errorf("relay: transaction interval %s: it must be below half the transaction timeout %s "+
			"(a Kafka transaction inside a PostgreSQL transaction is split at twice the interval, and Kafka aborts one open longer than the timeout)",
			c.Interval, c.TransactionTimeout)
	}
	return nil
}

func (c ExactlyOnce) withDefaults() ExactlyOnce {
	if c.CheckpointTopic == "" {
		c.CheckpointTopic = kafkatxn.DefaultCheckpointTopic
	}
	if c.Interval == 0 {
		c.Interval = DefaultTransactionInterval
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = DefaultTransactionMaxRecords
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = kafkatxn.DefaultTransactionTimeout
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	errs := []error{c.Replication.Validate(), c.Decoder.Validate(), c.Sink.Validate()}
	if c.Buffer < 0 || c.ShutdownTimeout < 0 || c.StartupTimeout < 0 {
		errs = append(errs, errors.New("relay: buffer and timeouts must not be negative"))
	}
	if c.ExactlyOnce != nil {
		errs = append(errs, c.ExactlyOnce.Validate())
	}
	if c.DeadLetterTable != "" {
		if _, err := outbox.ParseTable(c.DeadLetterTable); err != nil {
			errs = append(errs, fmt.Errorf("relay: dead-letter %w", err))
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.DLQTopic == "" {
		c.DLQTopic = "cdc-relay.dlq"
	}
	if c.DeadLetterTable == "" {
		c.DeadLetterTable = deadletters.DefaultTable
	}
	if c.Buffer == 0 {
		c.Buffer = 4096
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.StartupTimeout == 0 {
		c.StartupTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Replication.Logger == nil {
		c.Replication.Logger = c.Logger
	}
	if c.Sink.Logger == nil {
		c.Sink.Logger = c.Logger
	}
	if c.ExactlyOnce != nil {
		eo := c.ExactlyOnce.withDefaults()
		c.ExactlyOnce = &eo
	}
	return c
}
