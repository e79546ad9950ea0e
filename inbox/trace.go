package inbox

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"

	"github.com/cdc-relay/cdc-relay/internal/contract"
)

// HeaderCarrier is the OpenTelemetry propagation.TextMapCarrier over a Kafka record's headers
// that the relay injects its span with: Get reads the first header named key (ASCII case
// ignored), Set gives every header of that name the value or appends one, Keys lists the header
// names. A producer's traceparent and tracestate, written into the outbox row's headers in the
// same transaction, reach the record as they are, or with the relay's own span in their place
// when the relay traces (docs/tracing.md).
type HeaderCarrier = contract.HeaderCarrier

var _ propagation.TextMapCarrier = HeaderCarrier{}

// ExtractTrace returns ctx with the trace context of rec's headers (W3C traceparent and
// tracestate, with the propagator given in Config.Propagator, default
// propagation.TraceContext): trace.SpanContextFromContext then returns it as the remote parent,
// and a span started from ctx is its child. Without a valid traceparent ctx is returned as is.
func (in *Inbox) ExtractTrace(ctx context.Context, rec *kgo.Record) context.Context {
	return in.propagator.Extract(ctx, HeaderCarrier{Record: rec})
}
