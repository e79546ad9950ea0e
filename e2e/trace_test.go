package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/cdc-relay/cdc-relay/inbox"
	"github.com/cdc-relay/cdc-relay/testkit/otlpsink"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// The trace a service starts around its outbox insert: the row carries it in its headers.
const (
	rowTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	rowSpanID     = "00f067aa0ba902b7"
	rowTraceState = "congo=t61rcWkgMzE"
)

func rowTraceHeaders(spanID string) string {
	return fmt.Sprintf(`{"traceparent": "00-%s-%s-01", "tracestate": %q}`, rowTraceID, spanID, rowTraceState)
}

// otlpReceiver starts an in-process OTLP/HTTP receiver and returns it with the environment
// that points a cdc-relay process at it (spans exported every 100 ms).
func otlpReceiver(t *testing.T, extra ...string) (*otlpsink.Receiver, []string) {
	t.Helper()
	rcv, err := otlpsink.Start(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rcv.Close() }) // the test's own listener: nothing to report
	return rcv, append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL(), "OTEL_BSP_SCHEDULE_DELAY=100"}, extra...)
}

func spanByID(spans []otlpsink.Span, id string) *otlpsink.Span {
	for i := range spans {
		if hex.EncodeToString(spans[i].SpanId) == id {
			return &spans[i]
		}
	}
	return nil
}

// waitSpan waits until the receiver has the span named in rec's traceparent header.
func waitSpan(t *testing.T, rcv *otlpsink.Receiver, rec *kgo.Record) *otlpsink.Span {
	t.Helper()
	tp := strings.Split(testenv.Header(rec, "traceparent"), "-")
	if len(tp) != 4 {
		t.Fatalf("record %s: traceparent %q", testenv.Header(rec, "outbox-id"), testenv.Header(rec, "traceparent"))
	}
	var s *otlpsink.Span
	testenv.Eventually(t, 30*time.Second, "the span "+tp[2]+" to be exported", func() bool {
		s = spanByID(rcv.Spans(), tp[2])
		return s != nil
	})
	if got := hex.EncodeToString(s.TraceId); got != tp[1] {
		t.Errorf("span %s: trace id %s, the record's traceparent says %s", tp[2], got, tp[1])
	}
	return s
}

func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		default:
			return kv.Value.String()
		}
	}
	return ""
}

func events(s *otlpsink.Span) []string {
	var names []string
	for _, e := range s.Events {
		names = append(names, e.Name)
	}
	return names
}

// checkProducerSpan checks the span against the record Kafka holds: a producer span with the
// messaging conventions, and partition and offset, which only Kafka's acknowledgement tells:
// the span ended when Kafka acknowledged.
func checkProducerSpan(t *testing.T, s *otlpsink.Span, rec *kgo.Record, table string) {
	t.Helper()
	id := testenv.Header(rec, "outbox-id")
	if s.Kind != tracepb.Span_SPAN_KIND_PRODUCER || s.Name != "send "+rec.Topic {
		t.Errorf("outbox id %s: span %q kind %s, want a producer span named %q", id, s.Name, s.Kind, "send "+rec.Topic)
	}
	want := map[string]string{
		"messaging.system":                   "kafka",
		"messaging.operation.type":           "send",
		"messaging.destination.name":         rec.Topic,
		"messaging.destination.partition.id": strconv.Itoa(int(rec.Partition)),
		"messaging.kafka.offset":             strconv.FormatInt(rec.Offset, 10),
		"messaging.kafka.message.key":        string(rec.Key),
		"cdc_relay.outbox.id":                id,
		"cdc_relay.outbox.table":             table,
	}
	for k, v := range want {
		if got := attr(s.Attributes, k); got != v {
			t.Errorf("outbox id %s: span attribute %s = %q, want %q", id, k, got, v)
		}
	}
	if !strings.Contains(strings.Join(events(s), ","), "kafka.buffered") {
		t.Errorf("outbox id %s: span events %v, want kafka.buffered", id, events(s))
	}
	if attr(s.Resource.GetAttributes(), "service.name") != "cdc-relay" {
		t.Errorf("resource %v, want service.name cdc-relay", s.Resource.GetAttributes())
	}
	if s.EndTimeUnixNano < s.StartTimeUnixNano {
		t.Errorf("span ends before it starts: %d < %d", s.EndTimeUnixNano, s.StartTimeUnixNano)
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, `run` gives every record a producer span: a child of
// the row's traceparent, whose context replaces the record's traceparent header (the row's
// tracestate kept), so the consumer's extracted context (inbox.ExtractTrace) is the relay's
// span and the trace reads commit, relay, Kafka, consumer. A row without a traceparent gets a
// root span. A bad row's span is its dead letter's; a record Kafka rejects keeps its span
// through the dead-letter topic, with the path's steps as events.
func TestRunExportsAProducerSpanPerRecord(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	small := e.F.LimitedTopic(t, "small", "1024")
	rcv, env := otlpReceiver(t)
	cons := testenv.Consume(t, e.F.Topic)
	dlq := testenv.Consume(t, e.F.DLQ)
	e.Start(t, env)

	traced := e.F.Insert(t, false, testenv.Row{Key: "k1", Payload: `{"n": 1}`, Headers: rowTraceHeaders(rowSpanID)})[0]
	plain := e.F.Insert(t, false, testenv.Row{Key: "k2", Payload: `{"n": 2}`})[0]
	bad := e.F.Insert(t, false, testenv.Row{Key: "", Payload: `{"n": 3}`, Headers: rowTraceHeaders("1111111111111111")})[0]
	large := e.F.Insert(t, false, testenv.Row{Key: "k4", Topic: small,
		Payload: `{"pad": "` + strings.Repeat("x", 4096) + `"}`, Headers: rowTraceHeaders("2222222222222222")})[0]

	recs := cons.WaitFor(t, 60*time.Second, "both records", hasAll([]int64{traced, plain}))
	letters := dlq.WaitFor(t, 60*time.Second, "both dead letters", hasAll([]int64{bad, large}))
	byID := func(recs []*kgo.Record, id int64) *kgo.Record {
		for _, r := range recs {
			if testenv.Header(r, "outbox-id") == strconv.FormatInt(id, 10) {
				return r
			}
		}
		t.Fatalf("no record for outbox id %d", id)
		return nil
	}

	// The row's trace: the relay's span is the row's span's child, and the record names it.
	rec := byID(recs, traced)
	if got := testenv.Header(rec, "traceparent"); strings.Contains(got, rowSpanID) {
		t.Fatalf("traced row: the record's traceparent %s is still the row's own, not the relay's span", got)
	}
	s := waitSpan(t, rcv, rec)
	checkProducerSpan(t, s, rec, e.F.Table)
	if got := hex.EncodeToString(s.ParentSpanId); got != rowSpanID {
		t.Errorf("traced row: span's parent %s, want the row's span %s", got, rowSpanID)
	}
	if got := hex.EncodeToString(s.SpanId); got == rowSpanID {
		t.Errorf("traced row: the record's traceparent is still the row's own")
	}
	if got := testenv.Header(rec, "tracestate"); got != rowTraceState {
		t.Errorf("traced row: tracestate %q, want the row's %q", got, rowTraceState)
	}
	if n := strings.Count(fmt.Sprint(rec.Headers), "traceparent"); n != 1 {
		t.Errorf("traced row: %d traceparent headers, want 1: %v", n, rec.Headers)
	}
	in, err := inbox.New(inbox.Config{Consumer: "trace-test"})
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.SpanContextFromContext(in.ExtractTrace(context.Background(), rec))
	if sc.TraceID().String() != rowTraceID || sc.SpanID().String() != hex.EncodeToString(s.SpanId) || !sc.IsSampled() {
		t.Errorf("the consumer's extracted context is %s/%s, want the relay's span %s/%x", sc.TraceID(), sc.SpanID(), rowTraceID, s.SpanId)
	}

	// No traceparent: a root span, which the record then names.
	rec = byID(recs, plain)
	s = waitSpan(t, rcv, rec)
	checkProducerSpan(t, s, rec, e.F.Table)
	if len(s.ParentSpanId) != 0 {
		t.Errorf("row without traceparent: span has parent %x, want a root span", s.ParentSpanId)
	}

	// A bad row: its span is its dead letter's, an error with the reason.
	letter := byID(letters, bad)
	s = waitSpan(t, rcv, letter)
	if got := hex.EncodeToString(s.ParentSpanId); got != "1111111111111111" {
		t.Errorf("bad row: span's parent %s, want the row's span", got)
	}
	if s.Name != "send "+e.F.DLQ || s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		!strings.Contains(attr(s.Attributes, "cdc_relay.dead_letter.reason"), "aggregate") {
		t.Errorf("bad row: span %q status %v attributes %v", s.Name, s.Status, s.Attributes)
	}

	// Rejected by Kafka (too large for its topic): one span from the first produce until the
	// dead-letter topic acknowledged, the steps as events.
	letter = byID(letters, large)
	s = waitSpan(t, rcv, letter)
	if got := hex.EncodeToString(s.ParentSpanId); got != "2222222222222222" {
		t.Errorf("rejected record: span's parent %s, want the row's span", got)
	}
	if s.Name != "send "+small || attr(s.Attributes, "messaging.destination.name") != small {
		t.Errorf("rejected record: span %q, want the original topic's", s.Name)
	}
	if got := strings.Join(events(s), ","); !strings.Contains(got, "exception") ||
		!strings.Contains(got, "dead_letter.produce") || !strings.Contains(got, "dead_letter.acknowledged") {
		t.Errorf("rejected record: events %s, want exception, dead_letter.produce, dead_letter.acknowledged", got)
	}
	if attr(s.Attributes, "cdc_relay.dead_letter.topic") != e.F.DLQ ||
		attr(s.Attributes, "cdc_relay.dead_letter.offset") != strconv.FormatInt(letter.Offset, 10) ||
		s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("rejected record: status %v attributes %v", s.Status, s.Attributes)
	}
}

// OTEL_TRACES_SAMPLER is honoured: with always_off no span is exported and the records carry
// the rows' own headers, untouched (and none added to a row without them).
func TestRunTracingFollowsTheSampler(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	rcv, env := otlpReceiver(t, "OTEL_TRACES_SAMPLER=always_off")
	cons := testenv.Consume(t, e.F.Topic)
	p := e.Start(t, env)
	ids := e.F.Insert(t, false,
		testenv.Row{Key: "k1", Payload: `{}`, Headers: rowTraceHeaders(rowSpanID)},
		testenv.Row{Key: "k2", Payload: `{}`})
	recs := cons.WaitFor(t, 60*time.Second, "both records", hasAll(ids))
	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, r := range recs {
		want := ""
		if testenv.Header(r, "outbox-id") == strconv.FormatInt(ids[0], 10) {
			want = "00-" + rowTraceID + "-" + rowSpanID + "-01"
		}
		if got := testenv.Header(r, "traceparent"); got != want {
			t.Errorf("outbox id %s: traceparent %q, want the row's own %q", testenv.Header(r, "outbox-id"), got, want)
		}
	}
	if n, _ := rcv.Count(); n != 0 {
		t.Errorf("%d spans exported with OTEL_TRACES_SAMPLER=always_off", n)
	}
}

// `poll` traces as `run` does: the record's span is the row's span's child and the record's
// traceparent names it.
func TestPollExportsAProducerSpanPerRecord(t *testing.T) {
	t.Parallel()
	e := newPollEnv(t)
	rcv, env := otlpReceiver(t)
	cons := testenv.Consume(t, e.F.Topic)
	e.Start(t, env)
	id := e.F.Insert(t, false, testenv.Row{Key: "k1", Payload: `{}`, Headers: rowTraceHeaders(rowSpanID)})[0]
	rec := cons.WaitFor(t, 60*time.Second, "the record", hasAll([]int64{id}))[0]
	s := waitSpan(t, rcv, rec)
	checkProducerSpan(t, s, rec, e.F.Table)
	if got := hex.EncodeToString(s.ParentSpanId); got != rowSpanID {
		t.Errorf("span's parent %s, want the row's span %s", got, rowSpanID)
	}
}

// A tracing variable the relay cannot honour is bad configuration: exit 2, naming it.
func TestTracingConfigurationErrors(t *testing.T) {
	t.Parallel()
	bin := testenv.Binary(t, false)
	for _, tc := range []struct{ env, want string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"OTEL_TRACES_SAMPLER=sometimes", "OTEL_TRACES_SAMPLER"},
		{"OTEL_TRACES_EXPORTER=zipkin", "OTEL_TRACES_EXPORTER"},
	} {
		env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", tc.env}
		_, errOut, code := testenv.Run(t, 30*time.Second, bin, env, "run", "--pg-url", "postgres://127.0.0.1:1/x",
			"--brokers", "127.0.0.1:1", "--slot", "s", "--publication", "p")
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, want 2 with a message naming %s:\n%s", tc.env, code, tc.want, errOut)
		}
	}
}

// A record that its topic and the dead-letter topic both refuse keeps its span until the
// PostgreSQL dead-letter table has it: the span ends then, with each refusal and the table as
// events.
func TestRunTracesADeadLetterIntoTheTable(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	deleteTableLettersAtEnd(t, e.F)
	small, smallDLQ := e.F.LimitedTopic(t, "small", "1024"), e.F.LimitedTopic(t, "smalldlq", "1024")
	rcv, env := otlpReceiver(t)
	p := e.Start(t, env, "--dlq-topic", smallDLQ)
	id := e.F.Insert(t, false, testenv.Row{Key: "k1", Topic: small,
		Payload: `{"pad": "` + strings.Repeat("x", 4096) + `"}`, Headers: rowTraceHeaders(rowSpanID)})[0]
	testenv.Eventually(t, 60*time.Second, "the record in public.cdc_relay_dead_letters", func() bool {
		var n int
		if err := e.F.Pool.QueryRow(context.Background(), `SELECT count(*) FROM public.cdc_relay_dead_letters WHERE slot = $1 AND outbox_id = $2`,
			e.F.Slot, strconv.FormatInt(id, 10)).Scan(&n); err != nil {
			t.Fatalf("read the dead-letter table: %v", err)
		}
		return n == 1
	})
	var s *otlpsink.Span
	testenv.Eventually(t, 30*time.Second, "the record's span", func() bool {
		for _, sp := range rcv.Spans() {
			if attr(sp.Attributes, "cdc_relay.outbox.id") == strconv.FormatInt(id, 10) {
				s = &sp
				return true
			}
		}
		return false
	})
	if n := len(rcv.Spans()); n != 1 {
		t.Errorf("%d spans, want the record's one", n)
	}
	if got := hex.EncodeToString(s.ParentSpanId); got != rowSpanID {
		t.Errorf("span's parent %s, want the row's span %s", got, rowSpanID)
	}
	got := strings.Join(events(s), ",")
	if !strings.Contains(got, "dead_letter.produce") || !strings.HasSuffix(got, "dead_letter.table") || strings.Count(got, "exception") != 2 {
		t.Errorf("events %s, want the rejection, the dead-letter topic's refusal and the table", got)
	}
	if attr(s.Attributes, "cdc_relay.dead_letter.table") != "public.cdc_relay_dead_letters" || s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("status %v attributes %v", s.Status, s.Attributes)
	}
	p.Stop(t)
}

// Without an OTLP endpoint tracing is off: no tracer provider, so no exporter (the relay says
// nothing about tracing), and the record carries the row's traceparent and tracestate as they
// are. The empty variables stand for unset ones, so that an endpoint in the test's own
// environment cannot turn it on.
func TestRunWithoutAnEndpointLeavesTheRowsTraceContext(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	cons := testenv.Consume(t, e.F.Topic)
	p := e.Start(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_TRACES_SAMPLER=always_on"})
	id := e.F.Insert(t, false, testenv.Row{Key: "k1", Payload: `{}`, Headers: rowTraceHeaders(rowSpanID)})[0]
	rec := cons.WaitFor(t, 60*time.Second, "the record", hasAll([]int64{id}))[0]
	if got, want := testenv.Header(rec, "traceparent"), "00-"+rowTraceID+"-"+rowSpanID+"-01"; got != want {
		t.Errorf("traceparent %q, want the row's own %q", got, want)
	}
	if got := testenv.Header(rec, "tracestate"); got != rowTraceState {
		t.Errorf("tracestate %q, want the row's own %q", got, rowTraceState)
	}
	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if out := p.Output(); strings.Contains(out, "tracing") {
		t.Errorf("the relay set up tracing without an endpoint:\n%s", out)
	}
}
