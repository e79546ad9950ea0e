package bench

import (
	"sync"

	"github.com/cdc-relay/cdc-relay/testkit/otlpsink"
)

// The traced publishers (Publisher.Traced) export their spans to one in-process OTLP/HTTP
// receiver, started with the first of them and serving until the process exits: it decodes
// every export request and counts the spans, so the relay pays the whole cost of tracing
// (spans, batching, protobuf, HTTP) and the benchmark none of a collector's.
var traceSink struct {
	once sync.Once
	rcv  *otlpsink.Receiver
	err  error
}

// publisherEnv is pub's environment: pub.Env, and for a traced publisher the OTEL_* variables
// that point it at the receiver (the default sampler, parentbased_always_on: the benchmark's
// rows carry no traceparent, so every record gets a root span, the most tracing costs).
func publisherEnv(pub Publisher) ([]string, error) {
	if !pub.Traced {
		return pub.Env, nil
	}
	traceSink.once.Do(func() { traceSink.rcv, traceSink.err = otlpsink.Start(false) })
	if traceSink.err != nil {
		return nil, traceSink.err
	}
	return append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + traceSink.rcv.URL()}, pub.Env...), nil
}

// TracedSpans returns the spans and export requests the traced publishers sent, and whether
// any ran.
func TracedSpans() (spans, requests int, ok bool) {
	if traceSink.rcv == nil {
		return 0, 0, false
	}
	spans, requests = traceSink.rcv.Count()
	return spans, requests, true
}
