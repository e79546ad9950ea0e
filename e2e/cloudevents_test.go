package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/cdc-relay/cdc-relay/inbox"
	"github.com/cdc-relay/cdc-relay/testkit/cetest"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

const (
	e2eTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	e2eTracestate  = "congo=t61rcWkgMzE"
)

// `run --format cloudevents`: each record is a valid CloudEvent in binary content
// mode whose id, source, type, time and data are the row's, parsed by the CloudEvents SDK; the
// contract headers stay; the producer's traceparent and tracestate reach the record as they
// are and the inbox hands them to the handler as its span context; a row header named ce_* is
// a bad row.
func TestCloudEventsRunRoundTrip(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	p := e.Start(t, nil, "--format", "cloudevents")
	cons := testenv.Consume(t, e.F.Topic)
	dlq := testenv.Consume(t, e.F.DLQ)
	cfg, err := pgconn.ParseConfig(testenv.PGURL(t))
	if err != nil {
		t.Fatal(err)
	}
	source := "/cdc-relay/" + cfg.Database + "/" + e.F.Table

	before := time.Now().Add(-time.Minute)
	ids := e.F.Insert(t, false,
		testenv.Row{Key: "order-42", Payload: `{"order_id": 42}`, EventType: "order.created",
			Headers: `{"traceparent": "` + e2eTraceparent + `", "tracestate": "` + e2eTracestate + `"}`},
		testenv.Row{Key: "order-43", Payload: `{"order_id": 43}`},
	)
	bad := e.F.Insert(t, false, testenv.Row{Key: "order-44", Payload: `{}`, Headers: `{"ce_type": "spoofed"}`})[0]
	typed := e.F.Insert(t, false, testenv.Row{Key: "order-45", Payload: `"hi"`, Headers: `{"Content-Type": "text/plain"}`})[0]
	recs := cons.WaitFor(t, 60*time.Second, "the three events", func(r []*kgo.Record) bool { return len(r) >= 3 })
	byID := byOutboxID(recs)
	for i, id := range ids {
		r := byID[strconv.FormatInt(id, 10)]
		if r == nil {
			t.Fatalf("no record for outbox id %d", id)
		}
		ev := cetest.Parse(t, r)
		wantType := []string{"order.created", e.F.Table}[i] // no event_type: the table
		if ev.ID() != e.F.Table+":"+strconv.FormatInt(id, 10) || ev.Source() != source || ev.Type() != wantType ||
			ev.DataContentType() != "application/json" || ev.SpecVersion() != "1.0" {
			t.Errorf("event %d: %s", i, ev)
		}
		commit, err := time.Parse(time.RFC3339Nano, testenv.Header(r, "cdc-commit-time"))
		if err != nil || !ev.Time().Equal(commit) || ev.Time().Before(before) {
			t.Errorf("event %d: time %s, cdc-commit-time %s (%v)", i, ev.Time(), commit, err)
		}
		if !jsonEqual(t, ev.Data(), []byte(`{"order_id": `+strconv.Itoa(42+i)+`}`)) || !bytes.Equal(ev.Data(), r.Value) {
			t.Errorf("event %d: data %q", i, ev.Data())
		}
		if string(r.Key) != []string{"order-42", "order-43"}[i] {
			t.Errorf("event %d: key %q", i, r.Key)
		}
		for _, h := range []string{"outbox-id", "outbox-table", "aggregate-id", "cdc-lsn", "cdc-commit-time", "ce_id", "content-type"} {
			if n := headerCount(r, h); n != 1 {
				t.Errorf("event %d: %d %s headers, want 1", i, n, h)
			}
		}
	}

	// A row's Content-Type, in any letter case, is the event's datacontenttype under the
	// binding's header name content-type: once, and no default beside it (a row's
	// Content-Type once suppressed the default and stayed Content-Type, so a consumer reading
	// the binding's content-type found none).
	if r := byID[strconv.FormatInt(typed, 10)]; r == nil {
		t.Errorf("no record for outbox id %d", typed)
	} else if testenv.Header(r, "content-type") != "text/plain" || headerCount(r, "content-type") != 1 || headerCount(r, "Content-Type") != 0 {
		t.Errorf("the Content-Type row's headers: %v", r.Headers)
	}

	// Trace context: the row's headers as they are, and in the inbox handler's ctx.
	traced := byID[strconv.FormatInt(ids[0], 10)]
	if testenv.Header(traced, "traceparent") != e2eTraceparent || testenv.Header(traced, "tracestate") != e2eTracestate {
		t.Errorf("trace headers %v", traced.Headers)
	}
	in, err := inbox.New(inbox.Config{Consumer: "billing", Table: e.F.Name + "_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { _, _ = e.F.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+e.F.Name+`_inbox`) })
	if err := in.CreateTable(ctx, e.F.Pool); err != nil {
		t.Fatal(err)
	}
	var sc trace.SpanContext
	if _, err := in.Handle(ctx, e.F.Pool, traced, func(ctx context.Context, _ pgx.Tx, _ *kgo.Record) error {
		sc = trace.SpanContextFromContext(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || sc.TraceState().String() != e2eTracestate {
		t.Errorf("the handler's span context %+v", sc)
	}

	// A row header named ce_* is reserved: parked with the reason, never published.
	letters := dlq.WaitFor(t, 60*time.Second, "the ce_type row on the dead-letter topic", func(r []*kgo.Record) bool { return len(r) >= 1 })
	if got := testenv.Header(letters[0], "outbox-id"); got != strconv.FormatInt(bad, 10) ||
		!strings.Contains(testenv.Header(letters[0], "dlq-error"), `"ce_type" is reserved by the record contract`) {
		t.Errorf("dead letter %v", letters[0].Headers)
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
}

// `poll --format cloudevents --ce-source ...`: the same event id and type as run's, with the
// configured source.
func TestCloudEventsPoll(t *testing.T) {
	t.Parallel()
	e := newPollEnv(t)
	cons := testenv.Consume(t, e.F.Topic)
	id := e.F.Insert(t, false, testenv.Row{Key: "order-1", Payload: `{"n": 1}`, EventType: "order.created"})[0]
	e.Start(t, nil, "--format", "cloudevents", "--ce-source", "urn:example:orders")
	recs := cons.WaitFor(t, 60*time.Second, "the event", func(r []*kgo.Record) bool { return len(r) >= 1 })
	ev := cetest.Parse(t, recs[0])
	if ev.ID() != e.F.Table+":"+strconv.FormatInt(id, 10) || ev.Source() != "urn:example:orders" || ev.Type() != "order.created" ||
		!jsonEqual(t, ev.Data(), []byte(`{"n": 1}`)) || testenv.Header(recs[0], "cdc-commit-time") == "" {
		t.Errorf("event %s", ev)
	}
}

// With --format cloudevents a dead letter is no CloudEvent: no ce_* header (they travel as
// dlq-ce_*), on the dead-letter topic and in the dead-letter table, whose value is the bytea
// payload's bytes exactly; `dead-letters replay` writes those bytes back with the event's ce_*
// headers.
func TestCloudEventsDeadLettersCarryNoCloudEventHeaders(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	f := e.F
	payloadType(t, f, "bytea")
	ctx := context.Background()
	// The target topic and the dead-letter topic both refuse the large row, which goes to the
	// dead-letter table; a bad row (a NULL key) goes to the dead-letter topic.
	small, dlq := f.LimitedTopic(t, "small", "2048"), f.LimitedTopic(t, "smalldlq", "2048")
	table := "public." + f.Name + "_dl"
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })
	letters := testenv.Consume(t, dlq)
	p := e.Start(t, nil, "--format", "cloudevents", "--dlq-topic", dlq, "--dead-letter-table", table)

	big := bytes.Repeat(protobufBytes, 400) // 5200 bytes
	bigID := insertPayload(t, f, small, "big", big, "")
	badID := strconv.FormatInt(f.InsertValues(t, f.Table, "topic, payload, event_type", "$1, $2, 'order.created'", f.Topic, protobufBytes), 10)

	r := letters.WaitFor(t, 60*time.Second, "the bad row's dead letter", func(r []*kgo.Record) bool { return len(r) >= 1 })[0]
	if testenv.Header(r, "outbox-id") != badID || !bytes.Equal(r.Value, protobufBytes) || testenv.Header(r, "dlq-ce_type") != "order.created" {
		t.Errorf("dead letter: value %x headers %v", r.Value, r.Headers)
	}
	for _, h := range r.Headers {
		if strings.HasPrefix(strings.ToLower(h.Key), "ce_") {
			t.Errorf("dead letter on the topic has %s=%s", h.Key, h.Value)
		}
	}

	var value []byte
	var headers string
	testenv.Eventually(t, 60*time.Second, "the large row in the dead-letter table", func() bool {
		return f.Pool.QueryRow(ctx, `SELECT value, headers::text FROM `+table+` WHERE outbox_id = $1`, bigID).Scan(&value, &headers) == nil
	})
	if !bytes.Equal(value, big) {
		t.Errorf("dead-letter table value: %d bytes, want the payload's %d exactly", len(value), len(big))
	}
	var hm map[string]string
	if err := json.Unmarshal([]byte(headers), &hm); err != nil {
		t.Fatal(err)
	}
	for k := range hm {
		if strings.HasPrefix(strings.ToLower(k), "ce_") {
			t.Errorf("dead letter in the table has %s", k)
		}
	}
	if hm["dlq-ce_type"] != f.Table || hm["content-type"] != "application/octet-stream" {
		t.Errorf("dead letter in the table: headers %v", hm)
	}

	p.Stop(t)
	testenv.SetTopicConfig(t, small, "max.message.bytes", "1048576")
	replayed := testenv.Consume(t, small)
	env := []string{"CDC_RELAY_FROM=table", "CDC_RELAY_DEAD_LETTER_TABLE=" + table}
	if out, code := dlCLI(t, e.Bin, env, "replay", "--outbox-id", bigID); code != 0 || !strings.Contains(out, "replayed 1, refused 0") {
		t.Fatalf("replay: exit %d", code)
	}
	rr := replayed.WaitFor(t, 60*time.Second, "the replayed record", func(r []*kgo.Record) bool { return len(r) >= 1 })[0]
	wantBytes(t, "replayed", rr, big, "application/octet-stream")
	if testenv.Header(rr, "ce_type") != f.Table || testenv.Header(rr, "ce_id") != f.Table+":"+bigID || testenv.Header(rr, "ce_specversion") != "1.0" {
		t.Errorf("replayed record's headers %v, want its CloudEvents headers back", rr.Headers)
	}
}
