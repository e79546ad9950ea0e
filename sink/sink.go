package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/record"
)

// Sink is a Kafka producer configured for the relay's delivery guarantee.
type Sink struct {
	cl     *kgo.Client
	adm    *kadm.Client
	cfg    Config
	limits *topicLimits
	trace  *tracer // nil: tracing off (Config.Tracing)
}

// New creates the producer. It does not contact Kafka; call Ping to check reachability.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	limits := &topicLimits{def: int32(cfg.BatchMaxBytes), log: cfg.Logger, create: cfg.CreateTopics, required: map[string]bool{}}
	for _, t := range cfg.Topics {
		limits.required[t] = true
	}
	cl, err := kgo.NewClient(append(cfg.opts(), kgo.ProducerBatchMaxBytesFn(limits.batchMax))...)
	if err != nil {
		return nil, fmt.Errorf("sink: configure Kafka client: %w", err)
	}
	limits.cl = cl
	return &Sink{cl: cl, adm: kadm.NewClient(cl), cfg: cfg, limits: limits, trace: newTracer(cfg.Tracing, cfg.ClientID)}, nil
}

// Limits returns the producer's buffer limits: records and bytes.
func (s *Sink) Limits() (records, bytes int) { return s.cfg.MaxBufferedRecords, s.cfg.MaxBufferedBytes }

// largerThanBuffer reports whether r alone is more than the producer may buffer: franz-go
// fails it at once with MESSAGE_TOO_LARGE.
func (s *Sink) largerThanBuffer(r *kgo.Record) bool {
	return record.Size(r) > int64(s.cfg.MaxBufferedBytes)
}

// Client returns the underlying franz-go client (for admin requests and tests).
func (s *Sink) Client() *kgo.Client { return s.cl }

// Ping asks the cluster for metadata until it answers or ctx ends, and returns an error
// that names the brokers when it does not. A failure that retrying cannot fix (a
// certificate that is not trusted or does not name the broker, TLS against plaintext,
// refused credentials) ends it at once; the error then says what to check. Then it learns
// about each topic of Config.Topics (creating it if Config.CreateTopics says so) and returns a
// *TopicMissingError for one that does not exist.
func (s *Sink) Ping(ctx context.Context) error {
	err := retry.Backoff{Min: 250 * time.Millisecond, Max: 250 * time.Millisecond}.Until(ctx, func(int) error {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return s.cl.Ping(pctx)
	}, func(err error) bool { _, permanent := connectHint(err); return !permanent }, nil)
	if err != nil {
		return &unreachableError{brokers: s.cfg.Brokers, err: err}
	}
	for _, t := range s.cfg.Topics {
		if s.limits.learn(ctx, s.adm, t, true) {
			return &TopicMissingError{Topic: t}
		}
	}
	return ctx.Err()
}

// Produce buffers r and calls promise once Kafka has acknowledged it (err nil) or it has
// failed for good. It blocks while the producer's buffers are full, until space frees or
// ctx ends; ctx only bounds that wait: once buffered, a record is never failed because ctx
// ends (shutdown flushes instead). A record to a topic that does not exist (and that the sink
// does not create) fails at once, in this call, with a *TopicMissingError.
//
// With Config.Tracing, r gets a producer span that ends when Kafka acknowledges it (see
// docs/tracing.md): r.Context then carries the span, and r's traceparent header names it.
func (s *Sink) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	if r.Context == nil {
		r.Context = context.Background()
	}
	missing := s.limits.learn(ctx, s.adm, r.Topic, false)
	if s.trace != nil {
		promise = s.trace.start(r, promise) // a missing topic's refusal is on the span too
	}
	if missing {
		// Not an outage to wait out: the topic does not exist (topics.go).
		promise(r, &TopicMissingError{Topic: r.Topic})
		return
	}
	if err := ctx.Err(); err != nil {
		// Ended while the topic's limit was read: never buffered (franz-go would load the
		// partition with the default batch cap, above the topic's max.message.bytes).
		promise(r, err)
		return
	}
	s.cl.Produce(ctx, r, promise)
	if s.trace != nil {
		s.trace.buffered(r)
	}
}

// Send produces r as Produce does and calls outcome once with what became of it, decided for
// the publisher: Delivered, or its failure as Classify decides it, except that a record failed
// because the client closed is Unbuffered. A record given up (Unbuffered, Undelivered) has its
// producer span ended already (TraceFailed); a Refused one comes with its dead letter to to.
// outcome runs where Produce's promise does: on franz-go's callback goroutine, or in this call
// for a topic that does not exist or a ctx that ended first; it must not block.
func (s *Sink) Send(ctx context.Context, r *kgo.Record, to record.LetterTo, outcome func(*kgo.Record, Outcome)) {
	s.Produce(ctx, r, func(rec *kgo.Record, err error) { outcome(rec, s.outcome(rec, err, to)) })
}

// Publish sends p's record (record.Builder.Build's, which p.Refusal says may be sent) as Send
// does, with its dead letter to p.To, and calls outcome once with what became of it, where Send
// would.
func (s *Sink) Publish(ctx context.Context, p record.Publication, outcome func(Outcome)) {
	s.Send(ctx, p.Record, p.To, func(_ *kgo.Record, o Outcome) { outcome(o) })
}

// Flush waits until every buffered record has been acknowledged or failed, or ctx ends.
func (s *Sink) Flush(ctx context.Context) error { return s.cl.Flush(ctx) }

// Buffered returns the records currently buffered or in flight.
func (s *Sink) Buffered() int64 { return s.cl.BufferedProduceRecords() }

// Abort fails every buffered record that is not in flight (kgo.ErrAborting) and waits until
// none is buffered, or ctx ends. Records already sent may still be acknowledged.
func (s *Sink) Abort(ctx context.Context) error { return s.cl.AbortBufferedRecords(ctx) }

// BufferedBoth returns the records and bytes currently buffered or in flight.
func (s *Sink) BufferedBoth() (records, bytes int64) {
	return s.cl.BufferedProduceRecords(), s.cl.BufferedProduceBytes()
}

// Close closes the client. Records still buffered fail with kgo.ErrClientClosed, so call
// Flush first. Close is idempotent.
func (s *Sink) Close() { s.cl.Close() }
