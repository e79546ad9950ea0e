package inbox

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
)

// HeaderCarrier is an OpenTelemetry propagation.TextMapCarrier over a Kafka record's headers:
// Get reads the first header named key (ASCII case ignored), Set replaces it or appends one,
// Keys lists the header names. A producer's traceparent and tracestate, written into the
// outbox row's headers in the same transaction, reach the record as they are, or with the
// relay's own span in their place when the relay traces (docs/tracing.md).
type HeaderCarrier struct{ Record *kgo.Record }

var _ propagation.TextMapCarrier = HeaderCarrier{}

// Get returns the value of the first header named key, or "".
func (c HeaderCarrier) Get(key string) string {
	for _, h := range c.Record.Headers {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value)
		}
	}
	return ""
}

// Set replaces the first header named key, or appends it.
func (c HeaderCarrier) Set(key, value string) {
	for i, h := range c.Record.Headers {
		if strings.EqualFold(h.Key, key) {
			c.Record.Headers[i].Value = []byte(value)
			return
		}
	}
	c.Record.Headers = append(c.Record.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// Keys returns the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, len(c.Record.Headers))
	for i, h := range c.Record.Headers {
		keys[i] = h.Key
	}
	return keys
}

// ExtractTrace returns ctx with the trace context of rec's headers (W3C traceparent and
// tracestate, with the propagator given in Config.Propagator, default
// propagation.TraceContext): trace.SpanContextFromContext then returns it as the remote parent,
// and a span started from ctx is its child. Without a valid traceparent ctx is returned as is.
func (in *Inbox) ExtractTrace(ctx context.Context, rec *kgo.Record) context.Context {
	return in.propagator.Extract(ctx, HeaderCarrier{Record: rec})
}
