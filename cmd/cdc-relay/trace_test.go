package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// Without an OTLP endpoint no tracer provider (and so no exporter, no goroutine) is made,
// whatever other OTEL_* variables say; with one, it is, unless tracing is turned off.
func TestTracingIsOffWithoutAnEndpoint(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, env := range [][]string{
		nil,
		{"OTEL_SERVICE_NAME=x", "OTEL_TRACES_SAMPLER=always_on", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_SDK_DISABLED=true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_TRACES_EXPORTER=none"},
	} {
		tp, err := startTracing(context.Background(), envOf(env...), log)
		if tp != nil || err != nil {
			t.Errorf("%v: provider %v, error %v; want neither", env, tp, err)
		}
	}
	for _, env := range [][]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1/v1/traces", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
	} {
		tp, err := startTracing(context.Background(), envOf(env...), log)
		if tp == nil || err != nil {
			t.Fatalf("%v: provider %v, error %v; want a provider", env, tp, err)
		}
		stopTracing(tp, log)
	}
}

func TestTracingConfigurationIsAUsageError(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct{ env, name string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"OTEL_TRACES_SAMPLER=sometimes", "OTEL_TRACES_SAMPLER"},
		{"OTEL_TRACES_EXPORTER=jaeger", "OTEL_TRACES_EXPORTER"},
	} {
		_, err := startTracing(context.Background(), envOf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", tc.env), log)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: error %v, want a usage error naming %s", tc.env, err, tc.name)
		}
	}
}
