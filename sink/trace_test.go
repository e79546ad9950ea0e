package sink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cdc-relay/cdc-relay/record"
)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func tracedSink(t *testing.T, tp trace.TracerProvider) *Sink {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := New(Config{Brokers: c.ListenAddrs(), Tracing: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func produceTraced(t *testing.T, s *Sink, r *kgo.Record) error {
	t.Helper()
	done := make(chan error, 1)
	s.Produce(context.Background(), r, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("no promise within 20s")
		return nil
	}
}

// Without Config.Tracing a record keeps the row's own traceparent and carries no span.
func TestProduceWithoutTracingLeavesTheRecordAlone(t *testing.T) {
	s := tracedSink(t, nil)
	if s.trace != nil {
		t.Fatal("a Sink without Config.Tracing has a tracer")
	}
	r := &kgo.Record{Topic: "t", Value: []byte("x"), Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(testTraceparent)}}}
	if err := produceTraced(t, s, r); err != nil {
		t.Fatal(err)
	}
	if len(r.Headers) != 1 || string(r.Headers[0].Value) != testTraceparent {
		t.Errorf("headers %v, want the row's traceparent alone", r.Headers)
	}
	if trace.SpanFromContext(r.Context).SpanContext().IsValid() {
		t.Error("the record carries a span")
	}
}

// With Config.Tracing the span is the row's span's child, ends at the acknowledgement with
// partition and offset, and the record's traceparent (matched without regard to case, as the
// inbox reads it) names it.
func TestProduceWithTracingNamesTheSpanInTheRecord(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := tracedSink(t, tp)
	r := &kgo.Record{Topic: "t", Value: []byte("x"), Headers: []kgo.RecordHeader{
		{Key: record.HeaderOutboxID, Value: []byte("7")}, {Key: "TraceParent", Value: []byte(testTraceparent)}}}
	if err := produceTraced(t, s, r); err != nil {
		t.Fatal(err)
	}
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	sp := ended[0]
	if sp.Parent().SpanID().String() != "00f067aa0ba902b7" || sp.SpanKind() != trace.SpanKindProducer {
		t.Errorf("span parent %s kind %s", sp.Parent().SpanID(), sp.SpanKind())
	}
	want := "00-" + sp.SpanContext().TraceID().String() + "-" + sp.SpanContext().SpanID().String() + "-01"
	if len(r.Headers) != 2 || r.Headers[1].Key != "TraceParent" || string(r.Headers[1].Value) != want {
		t.Errorf("headers %v, want TraceParent=%s in place", r.Headers, want)
	}
	var offset bool
	for _, kv := range sp.Attributes() {
		offset = offset || kv.Key == "messaging.kafka.offset"
	}
	if !offset {
		t.Errorf("attributes %v: no offset", sp.Attributes())
	}
}

// A record franz-go aborts is never produced again: its span ends there.
func TestAbortedRecordEndsItsSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	failing := fakeCluster(t, kerr.NotLeaderForPartition.Code, 1<<30) // retried until aborted
	s, err := New(Config{Brokers: failing.cfg.Brokers, Tracing: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	s.Produce(context.Background(), &kgo.Record{Topic: "t", Value: []byte("x")}, func(_ *kgo.Record, err error) { done <- err })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, kgo.ErrAborting) {
		t.Fatalf("got %v, want kgo.ErrAborting", err)
	}
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans ended, want the aborted record's", n)
	}
}
