package inbox_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cdc-relay/cdc-relay/inbox"
)

const (
	traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tracestate  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

func tracedRecord(id string) *kgo.Record {
	return &kgo.Record{Topic: "x", Headers: []kgo.RecordHeader{
		{Key: inbox.HeaderOutboxID, Value: []byte(id)},
		{Key: inbox.HeaderOutboxTable, Value: []byte("public.outbox")},
		{Key: "traceparent", Value: []byte(traceparent)},
		{Key: "tracestate", Value: []byte(tracestate)},
	}}
}

func TestExtractTrace(t *testing.T) {
	in, err := inbox.New(inbox.Config{Consumer: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.SpanContextFromContext(in.ExtractTrace(context.Background(), tracedRecord("1")))
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() ||
		sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" ||
		sc.TraceState().String() != tracestate {
		t.Errorf("span context %+v", sc)
	}
	// No traceparent, or a bad one: ctx as it was.
	for _, r := range []*kgo.Record{
		{Headers: []kgo.RecordHeader{{Key: inbox.HeaderOutboxID, Value: []byte("1")}}},
		{Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-00000000000000000000000000000000-00f067aa0ba902b7-01")}}},
		{Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("garbage")}}},
	} {
		if sc := trace.SpanContextFromContext(in.ExtractTrace(context.Background(), r)); sc.IsValid() {
			t.Errorf("%v: span context %+v", r.Headers, sc)
		}
	}
}

func TestHeaderCarrier(t *testing.T) {
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "outbox-id", Value: []byte("1")}, {Key: "TraceParent", Value: []byte("a")}}}
	c := inbox.HeaderCarrier{Record: r}
	if c.Get("traceparent") != "a" || c.Get("tracestate") != "" {
		t.Errorf("get: %q %q", c.Get("traceparent"), c.Get("tracestate"))
	}
	c.Set("traceparent", "b")
	c.Set("tracestate", "s=1")
	if want := []string{"outbox-id", "TraceParent", "tracestate"}; !slices.Equal(c.Keys(), want) {
		t.Errorf("keys %q, want %q", c.Keys(), want)
	}
	if c.Get("traceparent") != "b" || c.Get("tracestate") != "s=1" {
		t.Errorf("after set: %v", r.Headers)
	}
	// A producer side injecting with the same carrier writes what the inbox reads.
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	out := &kgo.Record{}
	propagation.TraceContext{}.Inject(ctx, inbox.HeaderCarrier{Record: out})
	if got := (inbox.HeaderCarrier{Record: out}).Get("traceparent"); got != "00-01000000000000000000000000000000-0200000000000000-01" {
		t.Errorf("injected traceparent %q", got)
	}
}

// Handle runs the handler with the record's trace context in ctx: a span the
// handler starts is a child of the producer's span; a duplicate runs no handler at all.
func TestHandlePutsTheTraceContextInTheHandlersContext(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.inbox(t, "billing")
	var got []trace.SpanContext
	for i := range 2 {
		ran, err := in.Handle(context.Background(), f.pool, tracedRecord("7"), func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
			got = append(got, trace.SpanContextFromContext(ctx))
			return f.apply("billing", "7")(ctx, tx)
		})
		if err != nil {
			t.Fatal(err)
		}
		if ran != (i == 0) {
			t.Fatalf("delivery %d: ran %v", i+1, ran)
		}
	}
	if len(got) != 1 || got[0].TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !got[0].IsRemote() ||
		got[0].TraceState().String() != tracestate {
		t.Errorf("handler span contexts %+v", got)
	}
}
