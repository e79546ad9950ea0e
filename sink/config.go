package sink

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/cdc-relay/cdc-relay/record"
)

// Config configures a Sink. Zero fields take the defaults stated.
type Config struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// ClientID names the producer in broker logs and quotas. Default "cdc-relay".
	ClientID string
	// MaxBufferedRecords bounds the records the producer holds before Produce blocks.
	// Default 10,000.
	MaxBufferedRecords int
	// MaxBufferedBytes bounds the bytes the producer holds before Produce blocks: with
	// MaxBufferedRecords this is what keeps memory flat for a transaction of any size.
	// Default 32 MiB.
	MaxBufferedBytes int
	// Linger is how long a partition waits for more records before a request is built.
	// Default 0: each record is sent at once. The idempotent producer keeps up to five
	// requests in flight per broker (franz-go allows no fewer with idempotence), so records
	// share a request only when five are in flight or they were produced together: at a
	// steady load of one-row transactions, which arrive one at a time, most go in a request
	// of their own. A linger trades latency for fewer requests; Go's timers wake an idle
	// process at millisecond granularity, so a linger under 1ms costs about as much as 1ms
	// (docs/benchmark.md).
	Linger time.Duration
	// UnknownTopicRetries is how many times a record to a topic Kafka does not know is
	// retried before it fails (and is dead-lettered). Default 8; -1 retries forever.
	UnknownTopicRetries int
	// DialTimeout bounds the connection to a broker. Default 5s.
	DialTimeout time.Duration
	// BatchMaxBytes caps a record batch; each topic's batches are capped further at its
	// max.message.bytes, read before the first record to it. Default DefaultBatchMaxBytes.
	BatchMaxBytes int
	// CreateTopics, when set, makes the sink create a topic that does not exist before its
	// first record (and the Topics at Ping). Nil: a record to a missing topic fails at once
	// with a *TopicMissingError.
	CreateTopics *TopicCreation
	// Topics must exist before anything is produced (the dead-letter topic, a fixed topic):
	// Ping checks them (creating them with CreateTopics) and fails with a *TopicMissingError.
	Topics []string
	// CloudEvents, when set, is the --format cloudevents configuration: the publishers pass it
	// to record.NewRecord with every event (which then writes the CloudEvents headers). Nil: the
	// plain record contract. The Sink itself does not read it.
	CloudEvents *record.CloudEvents
	// Tracing, when set, gives every record a producer span (docs/tracing.md). Default nil:
	// no spans, no cost beyond one nil check per record.
	Tracing trace.TracerProvider
	// Logger receives the sink's warnings. Default slog.Default().
	Logger *slog.Logger
	// Opts are passed to kgo.NewClient after the options above, so they win.
	// TLS and SASL go here.
	Opts []kgo.Opt
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return ErrNoBrokers
	}
	for _, b := range c.Brokers {
		if b == "" {
			return fmt.Errorf("sink: empty broker address in %q: %w", c.Brokers, ErrNoBrokers)
		}
	}
	if c.BatchMaxBytes != 0 && (c.BatchMaxBytes < 512 || c.BatchMaxBytes > 1<<30) {
		return fmt.Errorf("sink: batch max bytes %d out of range: use 512 to 1 GiB", c.BatchMaxBytes)
	}
	if c.CreateTopics != nil {
		if err := c.CreateTopics.Validate(); err != nil {
			return err
		}
	}
	if c.MaxBufferedRecords < 0 || c.MaxBufferedBytes < 0 {
		return fmt.Errorf("sink: buffer limits must be positive (records %d, bytes %d)", c.MaxBufferedRecords, c.MaxBufferedBytes)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = "cdc-relay"
	}
	if c.MaxBufferedRecords == 0 {
		c.MaxBufferedRecords = 10_000
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = 32 << 20
	}
	if c.UnknownTopicRetries == 0 {
		c.UnknownTopicRetries = 8
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.BatchMaxBytes == 0 {
		c.BatchMaxBytes = DefaultBatchMaxBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// opts is the producer configuration the delivery guarantee rests on.
func (c Config) opts() []kgo.Opt {
	o := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.DialTimeout(c.DialTimeout),
		// acks=all with the idempotent producer (franz-go's default when acks=all):
		// retries neither reorder nor duplicate within a partition.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Retriable errors (broker down, leader moving) are retried forever: the relay
		// holds its position instead of spending a per-record budget.
		kgo.RecordRetries(math.MaxInt),
		kgo.RecordDeliveryTimeout(0),
		kgo.UnknownTopicRetries(c.UnknownTopicRetries),
		kgo.MaxBufferedRecords(c.MaxBufferedRecords),
		kgo.MaxBufferedBytes(c.MaxBufferedBytes),
		kgo.ProducerLinger(c.Linger),
		// Keyed records go to murmur2(key) % partitions, as the Java client does.
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
	return append(o, c.Opts...)
}
