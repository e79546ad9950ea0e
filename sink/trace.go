package sink

import (
	"context"
	"errors"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/cdc-relay/cdc-relay/internal/contract"
	"github.com/cdc-relay/cdc-relay/record"
)

// Span attributes of the relay's own (besides the messaging semantic conventions').
const (
	AttrOutboxID         = attribute.Key("cdc_relay.outbox.id")
	AttrOutboxTable      = attribute.Key("cdc_relay.outbox.table")
	AttrLSN              = attribute.Key("cdc_relay.lsn")
	AttrDeadLetterTopic  = attribute.Key("cdc_relay.dead_letter.topic")
	AttrDeadLetterPart   = attribute.Key("cdc_relay.dead_letter.partition.id")
	AttrDeadLetterOffset = attribute.Key("cdc_relay.dead_letter.offset")
	AttrDeadLetterTable  = attribute.Key("cdc_relay.dead_letter.table")
	AttrDeadLetterReason = attribute.Key("cdc_relay.dead_letter.reason")
)

// Span event names: when the producer took the record into its buffer (the time before it is
// the wait for buffer space, the time after it the wait for Kafka's acknowledgement), and the
// steps of the dead-letter path.
const (
	EventBuffered           = "kafka.buffered"
	EventDeadLetterProduce  = "dead_letter.produce"
	EventDeadLetterAcked    = "dead_letter.acknowledged"
	EventDeadLetterTable    = "dead_letter.table"
	tracerName              = "github.com/cdc-relay/cdc-relay/sink"
	deadLetteredDescription = "dead-lettered: "
)

// tracer makes one producer span per record (Config.Tracing). A Sink without it makes none
// and Produce pays one nil check.
type tracer struct {
	tr       trace.Tracer
	prop     propagation.TraceContext
	clientID string
}

func newTracer(tp trace.TracerProvider, clientID string) *tracer {
	if tp == nil {
		return nil
	}
	return &tracer{tr: tp.Tracer(tracerName), clientID: clientID}
}

// start begins r's producer span and returns the promise to hand franz-go, which ends it.
//
// A record whose Context already carries a recording span is a dead letter of a record that
// has one (DeadLetter copies the Context): its span goes on, with an event, until the
// dead-letter topic acknowledges. Any other record gets a new span, a child of the trace
// context in its headers (the row's traceparent) or a root; when the sampler records it, r's
// traceparent (and tracestate) headers are set to it, so that the consumer's span is its
// child. A span the sampler drops changes nothing: the row's own headers stay.
func (t *tracer) start(r *kgo.Record, promise func(*kgo.Record, error)) func(*kgo.Record, error) {
	if span := trace.SpanFromContext(r.Context); span.IsRecording() {
		span.AddEvent(EventDeadLetterProduce, trace.WithAttributes(AttrDeadLetterTopic.String(r.Topic)))
		return func(rec *kgo.Record, err error) {
			if err == nil {
				span.AddEvent(EventDeadLetterAcked)
				span.SetAttributes(AttrDeadLetterTopic.String(rec.Topic),
					AttrDeadLetterPart.String(strconv.Itoa(int(rec.Partition))), AttrDeadLetterOffset.Int64(rec.Offset))
				span.SetStatus(codes.Error, deadLetteredDescription+string(record.Header(rec, record.HeaderDLQError)))
				span.End()
			} else {
				t.failed(span, err)
			}
			promise(rec, err)
		}
	}
	parent := t.prop.Extract(context.Background(), contract.HeaderCarrier{Record: r})
	// The attributes are set once the sampler has kept the span (the standard samplers do not
	// read them): a dropped span costs the extraction and the decision only.
	ctx, span := t.tr.Start(parent, "send "+r.Topic, trace.WithSpanKind(trace.SpanKindProducer))
	if !span.IsRecording() {
		return promise
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName("send"),
		semconv.MessagingDestinationName(r.Topic),
		semconv.MessagingClientID(t.clientID),
		semconv.MessagingKafkaMessageKey(string(r.Key)),
	)
	var dlqErr string
	for _, h := range r.Headers {
		switch h.Key {
		case contract.OutboxID:
			attrs = append(attrs, AttrOutboxID.String(string(h.Value)))
		case contract.OutboxTable:
			attrs = append(attrs, AttrOutboxTable.String(string(h.Value)))
		case contract.LSN:
			attrs = append(attrs, AttrLSN.String(string(h.Value)))
		case contract.DLQError:
			dlqErr = string(h.Value)
			attrs = append(attrs, AttrDeadLetterReason.String(dlqErr))
		}
	}
	span.SetAttributes(attrs...)
	if dlqErr != "" {
		// A bad row, dead-lettered before it was produced: the span is its dead letter's.
		span.SetStatus(codes.Error, deadLetteredDescription+dlqErr)
	}
	r.Context = trace.ContextWithSpan(r.Context, span)
	t.prop.Inject(ctx, contract.HeaderCarrier{Record: r})
	return func(rec *kgo.Record, err error) {
		if err == nil {
			span.SetAttributes(semconv.MessagingDestinationPartitionID(strconv.Itoa(int(rec.Partition))), semconv.MessagingKafkaOffset(int(rec.Offset)))
			span.End()
		} else {
			t.failed(span, err)
		}
		promise(rec, err)
	}
}

// failed records err on span. The span ends here only when nobody will produce the record
// again (aborted, client closed); otherwise the publisher decides, in the promise: it
// dead-letters the record (DeadLetter, and the span goes on), produces it again, or gives up
// (TraceFailed).
func (t *tracer) failed(span trace.Span, err error) {
	span.RecordError(err)
	if errors.Is(err, kgo.ErrAborting) || errors.Is(err, kgo.ErrClientClosed) {
		span.SetStatus(codes.Error, err.Error())
		span.End()
	}
}

// buffered marks on r's span that Produce returned: the producer holds r.
func (t *tracer) buffered(r *kgo.Record) {
	trace.SpanFromContext(r.Context).AddEvent(EventBuffered)
}

// TraceParked ends the producer span r carries, if any and still open, for a dead letter
// committed to the PostgreSQL table: the record is parked.
func TraceParked(r *kgo.Record, table string) {
	span := recordSpan(r)
	if span == nil {
		return
	}
	span.AddEvent(EventDeadLetterTable, trace.WithAttributes(AttrDeadLetterTable.String(table)))
	span.SetAttributes(AttrDeadLetterTable.String(table))
	span.SetStatus(codes.Error, deadLetteredDescription+string(record.Header(r, record.HeaderDLQError)))
	span.End()
}

// TraceFailed ends the producer span r carries, if any and still open, with err: the
// publisher gives the record up (it stops; the record is published again after the restart).
func TraceFailed(r *kgo.Record, err error) {
	span := recordSpan(r)
	if span == nil {
		return
	}
	span.SetStatus(codes.Error, err.Error())
	span.End()
}

func recordSpan(r *kgo.Record) trace.Span {
	if r == nil || r.Context == nil {
		return nil
	}
	if span := trace.SpanFromContext(r.Context); span.IsRecording() {
		return span
	}
	return nil
}
