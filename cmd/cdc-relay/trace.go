package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/cdc-relay/cdc-relay/sink"
)

// Tracing is configured by the OpenTelemetry SDK's standard environment variables alone
// (docs/tracing.md): it is on when an OTLP endpoint is set, and off otherwise, with no
// tracer provider, exporter or goroutine made.
const (
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envOTLPTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envTracesExporter     = "OTEL_TRACES_EXPORTER"
	envTracesSampler      = "OTEL_TRACES_SAMPLER"
	envSDKDisabled        = "OTEL_SDK_DISABLED"
)

// samplers are the OTEL_TRACES_SAMPLER values the SDK knows.
var samplers = []string{"always_on", "always_off", "traceidratio", "parentbased_always_on",
	"parentbased_always_off", "parentbased_traceidratio"}

// tracingShutdown bounds the export of the last spans when run or poll stops.
const tracingShutdown = 5 * time.Second

// startTracing returns the tracer provider that exports spans over OTLP/HTTP as the OTEL_*
// variables (read through getenv) say, or nil when tracing is off: no OTLP endpoint is set,
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. A value the relay cannot honour is a
// usage error (exit 2) naming the variable. The caller shuts the provider down after the
// last record, which exports what is left.
func startTracing(ctx context.Context, getenv func(string) string, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	if getenv(envOTLPEndpoint) == "" && getenv(envOTLPTracesEndpoint) == "" {
		return nil, nil
	}
	if strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true") {
		return nil, nil
	}
	switch exp := strings.TrimSpace(getenv(envTracesExporter)); exp {
	case "none":
		return nil, nil
	case "", "otlp":
	default:
		return nil, usageErr("%s=%q: cdc-relay exports traces over OTLP only: use otlp, or none to turn tracing off", envTracesExporter, exp)
	}
	for _, name := range []string{envOTLPTracesProtocol, envOTLPProtocol} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != "http/protobuf" {
				return nil, usageErr("%s=%q: cdc-relay exports traces over OTLP/HTTP only: use http/protobuf (the collector's port 4318)", name, p)
			}
			break // the traces variable wins
		}
	}
	if s := strings.TrimSpace(getenv(envTracesSampler)); s != "" && !contains(samplers, s) {
		return nil, usageErr("%s=%q: unknown sampler: use one of %s", envTracesSampler, s, strings.Join(samplers, ", "))
	}
	exp, err := otlptracehttp.New(ctx) // reads the OTEL_EXPORTER_OTLP_* variables
	if err != nil {
		return nil, &usageError{fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_* variables): %w", err)}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("cdc-relay"), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, &usageError{fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)}
	}
	// The sampler comes from OTEL_TRACES_SAMPLER(_ARG) (default parentbased_always_on), the
	// batch processor's limits from OTEL_BSP_*.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: spans not exported", "cause", err)
	}))
	log.Info("tracing: exporting spans over OTLP/HTTP", "endpoint", firstSet(getenv, envOTLPTracesEndpoint, envOTLPEndpoint),
		"sampler", firstSet(getenv, envTracesSampler))
	return tp, nil
}

// stopTracing exports the spans left and stops the provider (nil: nothing to do).
func stopTracing(tp *sdktrace.TracerProvider, log *slog.Logger) {
	if tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("tracing: the last spans were not exported", "cause", err)
	}
}

// traceSink gives sc the tracer provider the OTEL_* variables ask for (startTracing), none when
// tracing is off. stop exports the last spans and ends it: call it once the producer is done.
func traceSink(ctx context.Context, sc *sink.Config, log *slog.Logger) (stop func(), err error) {
	tp, err := startTracing(ctx, os.Getenv, log)
	if err != nil {
		return nil, err
	}
	if tp != nil {
		sc.Tracing = tp
	}
	return func() { stopTracing(tp, log) }, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
