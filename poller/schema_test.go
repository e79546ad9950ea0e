package poller

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/schema"
)

// fakeRegistry encodes {"g": N} as "enc:" + N; g 3 does not fit; down makes it unavailable.
type fakeRegistry struct{ down atomic.Bool }

func (r *fakeRegistry) Encode(_ context.Context, topic, _ string, payload []byte) ([]byte, error) {
	subject := topic + "-value"
	if r.down.Load() {
		return nil, &schema.UnavailableError{Subject: subject, Err: errors.New("connection refused")}
	}
	var v struct{ G json.Number }
	if err := json.Unmarshal(payload, &v); err != nil || v.G == "3" {
		return nil, &schema.PayloadError{Subject: subject, SchemaID: 42, Format: schema.FormatAvro, Err: errors.New("field g: 3 is out of range")}
	}
	return []byte("enc:" + v.G), nil
}

func readAll(t *testing.T, f *fake, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.c.ListenAddrs()...), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n && ctx.Err() == nil {
		recs = append(recs, cl.PollFetches(ctx).Records()...)
	}
	return recs
}

// With a registry format, a registry that does not answer fails the cycle as a retryable fault:
// every row stays pending, nothing is published or dead-lettered. Once it answers, each value is
// the encoded one, and the row whose payload does not fit is a bad row: dead-lettered with its
// payload, the subject and the schema id, and marked.
func TestRegistryOutageKeepsRowsPendingAndPayloadMisfitIsDeadLettered(t *testing.T) {
	f := newFake(t, "events", "dlq")
	p, fx := newTestPoller(t, f, 10)
	reg := &fakeRegistry{}
	p.cfg.Schema = &Schema{Encoder: reg}
	ctx := context.Background()

	reg.down.Store(true)
	_, err := p.cycle(ctx)
	if !schema.Retriable(err) || !IsRetryable(err) {
		t.Fatalf("cycle with the registry down: %v, want a retryable registry fault", err)
	}
	if n := pendingRows(t, fx); n != 10 {
		t.Fatalf("%d rows pending after the outage's cycle, want 10", n)
	}
	if p.stats.DeadLettered.Load() != 0 || p.stats.Published.Load() != 0 {
		t.Fatalf("published %d, dead-lettered %d during the outage", p.stats.Published.Load(), p.stats.DeadLettered.Load())
	}

	reg.down.Store(false)
	if n, err := p.cycle(ctx); err != nil || n != 10 {
		t.Fatalf("cycle: %d rows, %v", n, err)
	}
	if pendingRows(t, fx) != 0 || p.stats.DeadLettered.Load() != 1 || p.stats.Published.Load() != 9 {
		t.Fatalf("pending %d, published %d, dead-lettered %d; want 0, 9, 1", pendingRows(t, fx), p.stats.Published.Load(), p.stats.DeadLettered.Load())
	}
	for _, r := range readAll(t, f, "events", 9) {
		if !strings.HasPrefix(string(r.Value), "enc:") {
			t.Errorf("published value %q is not the encoded one", r.Value)
		}
	}
	letters := readAll(t, f, "dlq", 1)
	if len(letters) != 1 {
		t.Fatalf("%d dead letters, want 1", len(letters))
	}
	l := letters[0]
	for k, want := range map[string]string{schema.HeaderDLQSubject: "events-value", schema.HeaderDLQSchemaID: "42", record.HeaderDLQClass: "bad-row"} {
		if got := string(record.Header(l, k)); got != want {
			t.Errorf("dead letter header %s = %q, want %q", k, got, want)
		}
	}
	if reason := string(record.Header(l, record.HeaderDLQError)); !strings.Contains(reason, "subject events-value, schema id 42") {
		t.Errorf("dlq-error %q names neither the subject nor the schema id", reason)
	}
	if !strings.Contains(string(l.Value), `"g": 3`) {
		t.Errorf("dead letter's value %q is not the row's payload", l.Value)
	}
}
