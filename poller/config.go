package poller

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// Config configures a Poller. Zero fields take the defaults stated.
type Config struct {
	// Conn is the parsed PostgreSQL connection (password, connect timeout, TLS applied).
	// Required. The poller's connections copy it.
	Conn *pgx.ConnConfig
	// Table is the outbox table, "schema.table" or "table" (schema public).
	// Default "public.outbox".
	Table string
	// Columns names the table's columns.
	Columns outbox.Columns
	// Topic, when set, is the topic of every record and the topic column is not read.
	Topic string
	// NullPayload says what a row with a NULL payload becomes: a bad row (the zero value,
	// outbox.NullPayloadDeadLetter) or a record with a null value (outbox.NullPayloadTombstone).
	NullPayload outbox.NullPayload
	// DLQTopic receives records Kafka rejects for good and rows that cannot become records,
	// with the original key, value and headers plus the error. Default "cdc-relay.dlq".
	DLQTopic string
	// Batch is the most rows one cycle selects. Default 100.
	Batch int
	// Interval is the time from the start of one cycle to the start of the next when a cycle
	// found fewer than Batch rows; after a full batch the next cycle starts at once.
	// Default 100ms.
	Interval time.Duration
	// AckTimeout bounds the wait for Kafka's acknowledgement of a batch. A batch not
	// acknowledged in time is rolled back and Kafka is treated as unavailable. Default 10s.
	AckTimeout time.Duration
	// ProbeTimeout bounds the metadata request that checks Kafka before the first cycle and
	// after a cycle that found it unavailable. Default 2s.
	ProbeTimeout time.Duration
	// MaxBackoff bounds the wait between cycles while PostgreSQL or Kafka is unavailable.
	// Default 5s.
	MaxBackoff time.Duration
	// Sink configures the Kafka producer (the relay's).
	Sink sink.Config
	// Logger is the poller's logger. Default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, observes published bytes, the created_at-to-ack latency and produce
	// errors by class. Default nil: none.
	Metrics *metrics.Poller
	// ExactlyOnce, when set, publishes each batch in one Kafka transaction whose checkpoint
	// names its rows, committed before they are marked (DESIGN.md "`poll --delivery
	// exactly-once`"). Nil: at least once, the rows marked after Kafka's acknowledgements.
	ExactlyOnce *ExactlyOnce
	// BeforeCommit, when set, runs after Kafka acknowledged a batch (with ExactlyOnce: after
	// its transaction committed) and before the rows are marked published. Fault-injection
	// tests use it.
	BeforeCommit func(rows int)
	// Schema, when set, writes each value in a schema registry's wire format (schema.go).
	Schema *Schema
	// Shard, when set, polls only the rows of that shard of the outbox (poll --shard): the
	// cycle's SELECT keeps the rows where Shard.RowFilter of the key column holds, the
	// expression the shard's publication filters with, computed by the same server, so a
	// key's rows go to the same shard's relay or poller. The default transactional id is the
	// shard's (Shard.Slot of the table's). Nil: every row.
	Shard *slotstore.Shard
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Conn == nil {
		errs = append(errs, errors.New("poller: no PostgreSQL connection configured"))
	}
	if _, err := outbox.ParseTable(c.withDefaults().Table); err != nil {
		errs = append(errs, err)
	}
	if c.Batch < 0 || c.Batch > maxBatch {
		errs = append(errs, fmt.Errorf("poller: batch %d: use 1 to %d", c.Batch, maxBatch))
	}
	if c.Interval < 0 || c.AckTimeout < 0 || c.ProbeTimeout < 0 || c.MaxBackoff < 0 {
		errs = append(errs, errors.New("poller: intervals and timeouts must not be negative"))
	}
	if c.ExactlyOnce != nil && c.withDefaults().AckTimeout > MaxAckTimeout {
		errs = append(errs, fmt.Errorf("poller: ack timeout %s: exactly-once allows at most %s, so that the acknowledgements and the commit fit the transaction timeout (%s)",
			c.withDefaults().AckTimeout, MaxAckTimeout, kafkatxn.DefaultTransactionTimeout))
	}
	errs = append(errs, c.Sink.Validate())
	return errors.Join(errs...)
}

// maxBatch keeps a cycle's records well inside the producer's default buffer.
const maxBatch = 10_000

func (c Config) withDefaults() Config {
	c.Table = cmp.Or(c.Table, outbox.DefaultTable)
	c.Columns = c.Columns.WithDefaults()
	c.DLQTopic = cmp.Or(c.DLQTopic, "cdc-relay.dlq")
	c.Batch = cmp.Or(c.Batch, 100)
	c.Interval = cmp.Or(c.Interval, 100*time.Millisecond)
	c.AckTimeout = cmp.Or(c.AckTimeout, 10*time.Second)
	c.ProbeTimeout = cmp.Or(c.ProbeTimeout, 2*time.Second)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, 5*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.ExactlyOnce != nil {
		table := c.Table
		if t, err := outbox.ParseTable(table); err == nil {
			table = t.String() // "outbox" is "public.outbox"
		}
		e := c.ExactlyOnce.withDefaults(table, c.Shard)
		c.ExactlyOnce = &e
	}
	return c
}
