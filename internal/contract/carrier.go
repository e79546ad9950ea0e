package contract

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderCarrier is an OpenTelemetry propagation.TextMapCarrier over a Kafka record's headers,
// names compared without regard to ASCII case: the relay injects its producer span with it
// (sink) and the inbox extracts a record's trace context with it, so what one writes the other
// reads. A row's own traceparent and tracestate reach the record as they are, or with the
// relay's span in their place when the relay traces (docs/tracing.md).
type HeaderCarrier struct{ Record *kgo.Record }

// Get returns the value of the first header named key, or "".
func (c HeaderCarrier) Get(key string) string {
	for _, h := range c.Record.Headers {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value)
		}
	}
	return ""
}

// Set gives every header named key the value, in place, or appends one: no header of that name
// is left to say otherwise. The value is a new slice: header values may be shared.
func (c HeaderCarrier) Set(key, value string) {
	found := false
	for i, h := range c.Record.Headers {
		if strings.EqualFold(h.Key, key) {
			c.Record.Headers[i].Value = []byte(value)
			found = true
		}
	}
	if !found {
		c.Record.Headers = append(c.Record.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
	}
}

// Keys returns the header names, in order.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, len(c.Record.Headers))
	for i, h := range c.Record.Headers {
		keys[i] = h.Key
	}
	return keys
}
