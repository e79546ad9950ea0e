package poller

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/sink"
)

// Columns names the outbox table's columns. Zero fields take the defaults shown; the names
// and defaults of the first six are the relay's (decoder.Columns).
type Columns struct {
	ID          string // "id" (ordered, unique; its text becomes the outbox-id header)
	AggregateID string // "aggregate_id" (the Kafka key; NULL or empty is a bad row)
	Topic       string // "topic" (required unless Config.Topic is set)
	Payload     string // "payload" (the record value, as text; NULL is a bad row)
	EventType   string // "event_type" (optional; used when the table has it)
	Headers     string // "headers" (optional jsonb object; used when the table has it)
	CreatedAt   string // "created_at" (timestamp; becomes cdc-commit-time)
	PublishedAt string // "published_at" (timestamp; NULL means pending)
}

func (c Columns) withDefaults() Columns {
	pick := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	pick(&c.ID, "id")
	pick(&c.AggregateID, "aggregate_id")
	pick(&c.Topic, "topic")
	pick(&c.Payload, "payload")
	pick(&c.EventType, "event_type")
	pick(&c.Headers, "headers")
	pick(&c.CreatedAt, "created_at")
	pick(&c.PublishedAt, "published_at")
	return c
}

// Config configures a Poller. Zero fields take the defaults stated.
type Config struct {
	// Conn is the parsed PostgreSQL connection (password, connect timeout, TLS applied).
	// Required. The poller's connections copy it.
	Conn *pgx.ConnConfig
	// Table is the outbox table, "schema.table" or "table" (schema public).
	// Default "public.outbox".
	Table string
	// Columns names the table's columns.
	Columns Columns
	// Topic, when set, is the topic of every record and the topic column is not read.
	Topic string
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
	// BeforeCommit, when set, runs after Kafka acknowledged a batch and before the rows are
	// marked published. Fault-injection tests use it.
	BeforeCommit func(rows int)
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Conn == nil {
		errs = append(errs, errors.New("poller: no PostgreSQL connection configured"))
	}
	if _, err := parseTable(c.withDefaults().Table); err != nil {
		errs = append(errs, err)
	}
	if c.Batch < 0 || c.Batch > maxBatch {
		errs = append(errs, fmt.Errorf("poller: batch %d: use 1 to %d", c.Batch, maxBatch))
	}
	if c.Interval < 0 || c.AckTimeout < 0 || c.ProbeTimeout < 0 || c.MaxBackoff < 0 {
		errs = append(errs, errors.New("poller: intervals and timeouts must not be negative"))
	}
	errs = append(errs, c.Sink.Validate())
	return errors.Join(errs...)
}

// maxBatch keeps a cycle's records well inside the producer's default buffer.
const maxBatch = 10_000

func (c Config) withDefaults() Config {
	if c.Table == "" {
		c.Table = "public.outbox"
	}
	c.Columns = c.Columns.withDefaults()
	if c.DLQTopic == "" {
		c.DLQTopic = "cdc-relay.dlq"
	}
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.Interval == 0 {
		c.Interval = 100 * time.Millisecond
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = 10 * time.Second
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = 2 * time.Second
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// table is a schema-qualified table name.
type table struct{ schema, name string }

func (t table) String() string   { return t.schema + "." + t.name }
func (t table) sanitize() string { return pgx.Identifier{t.schema, t.name}.Sanitize() }

// parseTable reads "schema.table" or "table" (schema public), names as the server stores
// them (unquoted identifiers are lower case).
func parseTable(s string) (table, error) {
	schema, name, ok := strings.Cut(s, ".")
	if !ok {
		schema, name = "public", s
	}
	if schema == "" || name == "" || strings.Contains(name, ".") {
		return table{}, fmt.Errorf("poller: table %q: want \"schema.table\" or \"table\"", s)
	}
	return table{schema: schema, name: name}, nil
}
