package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/decoder"
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
	// ShutdownTimeout bounds the final Kafka flush. Default 30s.
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
	// position is handed to the replication stream. Fault-injection tests use it.
	BeforeConfirm func(pglogrepl.LSN)
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	errs := []error{c.Replication.Validate(), c.Decoder.Validate(), c.Sink.Validate()}
	if c.Buffer < 0 || c.ShutdownTimeout < 0 || c.StartupTimeout < 0 {
		errs = append(errs, errors.New("relay: buffer and timeouts must not be negative"))
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
	return c
}
