package sink

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/retry"
)

// Batch sizes from each topic's max.message.bytes. franz-go never splits a batch that the
// broker refuses as too large: every record in it fails with MESSAGE_TOO_LARGE, small ones
// too. So before the first record to a topic is produced, the sink reads the topic's
// max.message.bytes (DescribeConfigs) and caps that topic's batches at it; franz-go then fails
// at once, before buffering, only a record that cannot fit in a batch on its own.
//
// franz-go reads the cap when it first loads a partition, so the cap must be known before then:
// learn blocks the producing goroutine (once per topic) until the broker answers, retrying while
// Kafka is unreachable. A topic whose config cannot be read (it does not exist yet, or the
// principal may not describe it) gets the default cap, and the relay logs why.

// DefaultBatchMaxBytes is franz-go's and Kafka's default max.message.bytes.
const DefaultBatchMaxBytes = 1_000_012

// batchOverhead bounds what a record batch of one record adds to the record's key, value and
// headers: the batch header (61 bytes) and the record's own varints, plus two per header.
const batchOverhead = 61 + 5*8

type topicLimits struct {
	def int32
	log *slog.Logger
	m   sync.Map // topic → int32
	mu  sync.Mutex
}

// batchMax is franz-go's ProducerBatchMaxBytesFn.
func (l *topicLimits) batchMax(topic string) int32 {
	if v, ok := l.m.Load(topic); ok {
		return v.(int32)
	}
	return l.def
}

func (l *topicLimits) known(topic string) bool {
	_, ok := l.m.Load(topic)
	return ok
}

// learn reads topic's max.message.bytes unless it is known, retrying while Kafka does not
// answer, until ctx ends.
func (l *topicLimits) learn(ctx context.Context, adm *kadm.Client, topic string) {
	if l.known(topic) {
		return
	}
	l.mu.Lock() // one describe at a time: the pipeline and the dead-letter goroutine may both ask
	defer l.mu.Unlock()
	var warned time.Time
	for attempt := 0; !l.known(topic); attempt++ {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		limit, err := describeMaxMessageBytes(dctx, adm, topic)
		cancel()
		switch {
		case err == nil:
			l.m.Store(topic, min(limit, l.def))
			return
		case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.TopicAuthorizationFailed),
			errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.InvalidTopicException),
			errors.Is(err, kerr.InvalidRequest), errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, errNoLimit):
			// Retrying cannot help: produce with the default cap. A missing topic fails its
			// records anyway; a cap above the topic's limit can only refuse a batch, which the
			// relay never dead-letters for a record that fits on its own.
			l.log.Warn("cannot read the topic's max.message.bytes: batches to it are capped at the default; "+
				"grant DescribeConfigs on the topic (or lower --batch-max-bytes below its limit)",
				"topic", topic, "batch_max_bytes", l.def, "cause", err)
			l.m.Store(topic, l.def)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(warned) > 10*time.Second {
			warned = time.Now()
			l.log.Warn("waiting for Kafka to describe a topic before producing to it", "topic", topic, "cause", err)
		}
		if !retry.Sleep(ctx, retry.Backoff{Min: 250 * time.Millisecond, Max: 4 * time.Second}.Delay(attempt)) {
			return
		}
	}
}

var errNoLimit = errors.New("the broker returned no max.message.bytes")

func describeMaxMessageBytes(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return 0, err
	}
	if rc.Err != nil {
		return 0, rc.Err
	}
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			n, err := strconv.ParseInt(*c.Value, 10, 32)
			if err != nil || n <= 0 {
				return 0, errNoLimit
			}
			return int32(n), nil
		}
	}
	return 0, errNoLimit
}

// tooLargeAlone reports whether r cannot fit in a batch of its own under its topic's cap.
func (l *topicLimits) tooLargeAlone(r *kgo.Record) bool {
	n := int64(len(r.Key) + len(r.Value) + batchOverhead)
	for _, h := range r.Headers {
		n += int64(len(h.Key)+len(h.Value)) + 10
	}
	return n > int64(l.batchMax(r.Topic))
}
