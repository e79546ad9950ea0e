package sink

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/testkit/otlpsink"
	"github.com/cdc-relay/cdc-relay/testkit/proc"
)

// BenchmarkRecordSpan is what tracing adds to each record, export included: the span's start
// with the record's attributes, the traceparent header, the buffered event, the end at the
// acknowledgement, and the batch processor's OTLP/HTTP export to an in-process receiver (its
// decoding too: the process's CPU time per record, cpu-ns/op, counts every goroutine).
//
//	go test -run '^$' -bench RecordSpan -benchtime 200000x ./sink
func BenchmarkRecordSpan(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: tracing off
	}{
		{"off", nil},
		{"sampled", sdktrace.ParentBased(sdktrace.AlwaysSample())},
		{"ratio-0.1", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))},
		{"dropped", sdktrace.ParentBased(sdktrace.NeverSample())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var tr *tracer
			var tp *sdktrace.TracerProvider
			if bc.sampler != nil {
				rcv, err := otlpsink.Start(false)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = rcv.Close() }()
				exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.URL()+"/v1/traces"))
				if err != nil {
					b.Fatal(err)
				}
				tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(bc.sampler))
				tr = newTracer(tp, "cdc-relay")
			}
			noop := func(*kgo.Record, error) {}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := proc.SelfCPU()
			for i := 0; i < b.N; i++ {
				r := &kgo.Record{Topic: "orders", Key: []byte("order-42"), Value: []byte(`{"order_id": 42}`), Context: context.Background(),
					Headers: []kgo.RecordHeader{{Key: record.HeaderOutboxID, Value: []byte("42")}, {Key: record.HeaderOutboxTable, Value: []byte("public.outbox")},
						{Key: record.HeaderAggregateID, Value: []byte("order-42")}, {Key: record.HeaderLSN, Value: []byte("0/16B3748")}}}
				promise := noop
				if tr != nil {
					promise = tr.start(r, noop)
					tr.buffered(r)
				}
				r.Partition, r.Offset = 1, int64(i)
				promise(r, nil)
			}
			if tp != nil {
				if err := tp.Shutdown(context.Background()); err != nil { // the export of what is left counts
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(proc.SelfCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
