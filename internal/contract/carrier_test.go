package contract

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A row may carry its traceparent under two spellings of the name (a JSON object's keys are
// case-sensitive). The relay's span replaces both, in place, so that no consumer, whichever it
// reads, finds the row's parent instead of the relay's; and the inbox, reading the first, finds
// what the relay wrote.
func TestHeaderCarrierSetReplacesEverySpellingInPlace(t *testing.T) {
	r := &kgo.Record{Headers: []kgo.RecordHeader{
		{Key: "outbox-id", Value: []byte("1")}, {Key: "TraceParent", Value: []byte("a")}, {Key: "traceparent", Value: []byte("b")},
	}}
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	propagation.TraceContext{}.Inject(ctx, HeaderCarrier{Record: r})
	const want = "00-01000000000000000000000000000000-0200000000000000-01"
	if got := []string{string(r.Headers[1].Value), string(r.Headers[2].Value)}; !slices.Equal(got, []string{want, want}) {
		t.Errorf("traceparent headers %q, want both %q", got, want)
	}
	if keys := (HeaderCarrier{Record: r}).Keys(); !slices.Equal(keys, []string{"outbox-id", "TraceParent", "traceparent"}) {
		t.Errorf("keys %q: nothing is appended when the name is there", keys)
	}
	if got := (HeaderCarrier{Record: r}).Get("TRACEPARENT"); got != want {
		t.Errorf("Get %q, want %q", got, want)
	}
	// Absent, the header is appended once.
	out := &kgo.Record{}
	(HeaderCarrier{Record: out}).Set("tracestate", "s=1")
	if len(out.Headers) != 1 || out.Headers[0].Key != "tracestate" || string(out.Headers[0].Value) != "s=1" {
		t.Errorf("headers %v", out.Headers)
	}
}
