package sink

import (
	"cmp"
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

// DefaultBatchMaxBytes is franz-go's and Kafka's default max.message.bytes.
const DefaultBatchMaxBytes = 1_000_012

// batchOverhead bounds what a record batch of one record adds to the record's key, value and
// headers: the batch header (61 bytes) and the record's own varints, plus two per header.
const batchOverhead = 61 + 5*8

// topicLimits caps each topic's batches at its max.message.bytes: franz-go never splits a batch
// the broker refuses as too large, and fails every record in it, small ones too. The cap must be
// known before franz-go first loads a partition, so learn reads it (DescribeConfigs) before the
// topic's first record, blocking the producing goroutine once per topic and retrying while Kafka
// is unreachable; then only a record that cannot fit in a batch alone fails, at once. A topic
// whose config cannot be read gets the default cap, and the relay logs why.
// (DESIGN.md, "Too large means too large alone")
type topicLimits struct {
	def      int32
	log      *slog.Logger
	create   *TopicCreation  // nil: never create a topic
	required map[string]bool // Config.Topics: Ping says when one is missing
	cl       *kgo.Client     // for metadata requests that bypass its cache (topicMetadata)
	m        sync.Map        // topic → int32
	mu       sync.Mutex
	// missing holds, under mu, when the cluster last said a topic does not exist.
	missing map[string]time.Time
	// warned holds, under mu, the topics whose absence was logged.
	warned map[string]bool
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

// learn finds out, unless it is known, whether topic exists (creating it when l.create says
// so) and its max.message.bytes, retrying while Kafka does not answer, until ctx ends. It
// reports whether the topic does not exist: its records must fail (TopicMissingError). Its
// absence is logged once, unless quiet: Ping returns it as its error instead.
func (l *topicLimits) learn(ctx context.Context, adm *kadm.Client, topic string, quiet bool) (missing bool) {
	if l.known(topic) {
		return false
	}
	l.mu.Lock() // one describe at a time: the pipeline and the dead-letter goroutine may both ask
	defer l.mu.Unlock()
	if l.known(topic) {
		return false
	}
	if at, ok := l.missing[topic]; ok && time.Since(at) < missingRecheck {
		if !quiet {
			l.warnMissing(topic) // Ping, quiet, may have been the one to find it missing
		}
		return true
	}
	var warned time.Time
	for attempt := 0; !l.known(topic); attempt++ {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		missing, err := l.inspect(dctx, adm, topic, quiet)
		cancel()
		if err == nil {
			return missing
		}
		if ctx.Err() != nil {
			return false
		}
		if time.Since(warned) > 10*time.Second {
			warned = time.Now()
			l.log.Warn("waiting for Kafka to describe a topic before producing to it", "topic", topic, "cause", err)
		}
		if !retry.Sleep(ctx, retry.Backoff{Min: 250 * time.Millisecond, Max: 4 * time.Second}.Delay(attempt)) {
			return false
		}
	}
	return false
}

// inspect is one attempt of learn, under l.mu. An error is one worth retrying.
func (l *topicLimits) inspect(ctx context.Context, adm *kadm.Client, topic string, quiet bool) (missing bool, err error) {
	facts, err := topicMetadata(ctx, l.cl, topic)
	if err == nil && facts.missing && l.create != nil {
		created, err := createTopic(ctx, adm, *l.create, topic)
		if err != nil {
			if retriable(err) {
				return false, err
			}
			l.log.Error("cannot create the topic: its records are dead-lettered until it exists",
				"topic", topic, "partitions", l.create.Partitions, "replication_factor", l.create.ReplicationFactor, "cause", err)
			l.markMissing(topic, false)
			return true, nil
		}
		if created {
			l.log.Info("created topic", "topic", topic, "partitions", l.create.Partitions, "replication_factor", l.create.ReplicationFactor)
		}
		// The metadata may not show it at once: ask again (a retry if it does not yet).
		if facts, err = topicMetadata(ctx, l.cl, topic); err == nil && facts.missing {
			return false, errors.New("the topic just created is not in the cluster's metadata yet")
		}
	}
	switch {
	case err == nil && facts.missing:
		l.markMissing(topic, !quiet)
		return true, nil
	case err != nil && retriable(err):
		return false, err
	}
	delete(l.missing, topic)
	metaErr := err // not authorized to describe it, or an invalid name: its records fail in franz-go
	limit, minISR, err := describeTopicConfigs(ctx, adm, topic)
	switch {
	case err == nil:
		if w := durabilityWarning(facts, minISR); metaErr == nil && w != "" {
			l.log.Warn(w, "topic", topic, "replication_factor", facts.replication, "min_insync_replicas", minISR, "brokers", facts.brokers)
		}
		l.m.Store(topic, min(limit, l.def))
		return false, nil
	case retriable(err) && metaErr == nil:
		return false, err
	}
	// Retrying cannot help: produce with the default cap. A record to a topic Kafka refuses
	// fails anyway; a cap above the topic's limit can only refuse a batch, which the relay
	// never dead-letters for a record that fits on its own.
	cause := cmp.Or(metaErr, err)
	hint := "grant DescribeConfigs on the topic (or lower --batch-max-bytes below its limit)"
	if errors.Is(cause, kerr.InvalidTopicException) {
		hint = "the name is not a valid Kafka topic name: its records are dead-lettered"
	} else if errors.Is(cause, kerr.TopicAuthorizationFailed) {
		hint = "the relay may not describe the topic (grant Describe, DescribeConfigs and Write on it)"
	}
	l.log.Warn("cannot read the topic's max.message.bytes: batches to it are capped at the default; "+hint,
		"topic", topic, "batch_max_bytes", l.def, "cause", cause)
	l.m.Store(topic, l.def)
	return false, nil
}

// markMissing notes, under l.mu, that topic does not exist, and says so (warnMissing) if warn.
func (l *topicLimits) markMissing(topic string, warn bool) {
	if l.missing == nil {
		l.missing = map[string]time.Time{}
	}
	l.missing[topic] = time.Now()
	if warn {
		l.warnMissing(topic)
	}
}

// warnMissing says, under l.mu and once per topic, that topic does not exist and what that
// does: a row's topic's records are dead-lettered; one of Config.Topics (the dead-letter topic,
// a fixed topic) is needed, and its records fail until it exists (the relay parks dead letters
// in its table then).
func (l *topicLimits) warnMissing(topic string) {
	if l.warned == nil {
		l.warned = map[string]bool{}
	}
	if l.warned[topic] {
		return
	}
	l.warned[topic] = true
	what := "its records are dead-lettered until it does"
	if l.required[topic] {
		what = "the relay needs it (the dead-letter topic, or --topic), and records to it fail until it does"
	}
	l.log.Error("topic does not exist in Kafka: "+what+"; "+
		"create it (kafka-topics.sh --create --topic NAME), or let the relay create missing topics (--create-topics)",
		"topic", topic)
}

// retriable reports whether a failed admin request is worth asking again: Kafka did not
// answer, or answered with an error it calls retriable.
func retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	var ae *kadm.AuthError
	return !errors.As(err, &ae) && !errors.Is(err, errNoLimit)
}

var errNoLimit = errors.New("the broker returned no max.message.bytes")

// describeTopicConfigs reads the topic's max.message.bytes and min.insync.replicas ("" when
// the broker did not say).
func describeTopicConfigs(ctx context.Context, adm *kadm.Client, topic string) (int32, string, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, "", err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return 0, "", err
	}
	if rc.Err != nil {
		return 0, "", rc.Err
	}
	var limit int32
	var minISR string
	for _, c := range rc.Configs {
		switch {
		case c.Key == "max.message.bytes" && c.Value != nil:
			n, err := strconv.ParseInt(*c.Value, 10, 32)
			if err != nil || n <= 0 {
				return 0, "", errNoLimit
			}
			limit = int32(n)
		case c.Key == "min.insync.replicas" && c.Value != nil:
			minISR = *c.Value
		}
	}
	if limit == 0 {
		return 0, "", errNoLimit
	}
	return limit, minISR, nil
}

// tooLargeAlone reports whether r cannot fit in a batch of its own under its topic's cap.
func (l *topicLimits) tooLargeAlone(r *kgo.Record) bool {
	n := int64(len(r.Key) + len(r.Value) + batchOverhead)
	for _, h := range r.Headers {
		n += int64(len(h.Key)+len(h.Value)) + 10
	}
	return n > int64(l.batchMax(r.Topic))
}
