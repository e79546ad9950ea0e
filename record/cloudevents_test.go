package record

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/testkit/cetest"
)

func TestCloudEventsRoundTripThroughTheSDK(t *testing.T) {
	ce, err := NewCloudEvents(FormatCloudEvents, "", &pgconn.Config{User: "relay", Database: "app"})
	if err != nil {
		t.Fatal(err)
	}
	commit := time.Date(2026, 11, 29, 10, 11, 12, 345678000, time.FixedZone("x", 3600))
	payload := []byte(`{"order_id": 42}`)
	r := NewRecord(outbox.Event{
		ID: "42", Relation: "public.outbox", AggregateID: "order-42", Topic: "brew.orders.v1", Payload: payload,
		EventType: "order.created", Headers: []outbox.Header{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}},
	}, NewStamp(pglogrepl.LSN(0x16B3748), commit), ce)
	// The Kafka record is the contract's: key, value and every contract header, once.
	if string(r.Key) != "order-42" || !bytes.Equal(r.Value, payload) || r.Topic != "brew.orders.v1" {
		t.Fatalf("topic/key/value: %q %q %q", r.Topic, r.Key, r.Value)
	}
	want := []string{"outbox-id=42", "outbox-table=public.outbox", "aggregate-id=order-42", "event-type=order.created",
		"traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "cdc-lsn=0/16B3748", "cdc-commit-time=2026-11-29T09:11:12.345678Z",
		"ce_specversion=1.0", "ce_id=public.outbox:42", "ce_source=/cdc-relay/app/public.outbox", "ce_type=order.created",
		"ce_time=2026-11-29T09:11:12.345678Z", "content-type=application/json"}
	wantHeaders(t, r, want)

	ev := cetest.Parse(t, r)
	if ev.SpecVersion() != "1.0" || ev.ID() != "public.outbox:42" || ev.Source() != "/cdc-relay/app/public.outbox" ||
		ev.Type() != "order.created" || !ev.Time().Equal(commit) || ev.DataContentType() != "application/json" {
		t.Errorf("event %s", ev)
	}
	if !bytes.Equal(ev.Data(), payload) {
		t.Errorf("data %q, want the payload %q", ev.Data(), payload)
	}
	var data struct {
		OrderID int `json:"order_id"`
	}
	if err := ev.DataAs(&data); err != nil || data.OrderID != 42 {
		t.Errorf("DataAs: %+v, %v", data, err)
	}
	// The contract headers are no ce_* names: they are not extensions of the event.
	if len(ev.Extensions()) != 0 {
		t.Errorf("extensions %v, want none", ev.Extensions())
	}
}

// The same row from the polling publisher (no LSN, created_at as the time) is the same event.
func TestCloudEventsPollAndRunAgree(t *testing.T) {
	ce := &CloudEvents{Database: "app"}
	at := time.Unix(1_700_000_000, 0)
	run := NewRecord(outbox.Event{ID: "7", Relation: "public.outbox", AggregateID: "k", Topic: "t", Payload: []byte(`1`)}, NewStamp(5, at), ce)
	poll := NewRecord(outbox.Event{ID: "7", Relation: "public.outbox", AggregateID: "k", Topic: "t", Payload: []byte(`1`)}, NewStamp(0, at), ce)
	a, b := cetest.Parse(t, run), cetest.Parse(t, poll)
	if a.ID() != b.ID() || a.Source() != b.Source() || a.Type() != b.Type() || !a.Time().Equal(b.Time()) {
		t.Errorf("run %s\npoll %s", a, b)
	}
}

func TestCloudEventsDefaultsAndOverrides(t *testing.T) {
	at := time.Unix(0, 0)
	// No event type: ce_type is the source table. A logical message: its "message:<prefix>".
	r := NewRecord(outbox.Event{ID: "3", Relation: "sales.outbox", AggregateID: "k", Topic: "t", Payload: []byte(`{}`)}, NewStamp(5, at), &CloudEvents{Database: "my db"})
	ev := cetest.Parse(t, r)
	if ev.Type() != "sales.outbox" || ev.ID() != "sales.outbox:3" || ev.Source() != "/cdc-relay/my%20db/sales.outbox" {
		t.Errorf("event %s", ev)
	}
	if Header(r, HeaderEventType) != nil {
		t.Error("event-type header without an event type")
	}
	m := NewRecord(outbox.Event{ID: "order-42-created", Relation: "message:outbox", AggregateID: "k", Topic: "t", Payload: []byte(`{}`)}, NewStamp(5, at), &CloudEvents{Database: "app"})
	ev = cetest.Parse(t, m)
	if ev.Type() != "message:outbox" || ev.ID() != "message:outbox:order-42-created" || ev.Source() != "/cdc-relay/app/message:outbox" {
		t.Errorf("message event %s", ev)
	}

	// --ce-source, and a row that says its own content type, in another letter case: that one,
	// once, under the binding's name content-type (a consumer that reads the header by the
	// binding's name found none, and no default either).
	ce, err := NewCloudEvents(FormatCloudEvents, "https://orders.example.com/outbox", &pgconn.Config{User: "x", Database: "db"})
	if err != nil {
		t.Fatal(err)
	}
	r = NewRecord(outbox.Event{ID: "4", Relation: "public.outbox", AggregateID: "k", Topic: "t", Payload: []byte(`"aGk="`),
		Headers: []outbox.Header{{Key: "Content-Type", Value: []byte("application/cloudevents-data+json")}}}, NewStamp(5, at), ce)
	n := 0
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, HeaderContentType) {
			n++
		}
	}
	if got := string(Header(r, "content-type")); got != "application/cloudevents-data+json" {
		t.Errorf("header content-type %q, want the row's Content-Type; headers %v", got, r.Headers)
	}
	// Without --format cloudevents a row's headers pass as they are.
	if p := NewRecord(outbox.Event{ID: "4", Relation: "public.outbox", AggregateID: "k", Topic: "t",
		Headers: []outbox.Header{{Key: "Content-Type", Value: []byte("x")}}}, NewStamp(5, at), nil); Header(p, "Content-Type") == nil {
		t.Errorf("the outbox format renamed a row's Content-Type: %v", p.Headers)
	}
	ev = cetest.Parse(t, r)
	if n != 1 || ev.DataContentType() != "application/cloudevents-data+json" || ev.Source() != "https://orders.example.com/outbox" {
		t.Errorf("%d content-type headers; event %s", n, ev)
	}

	// The outbox format writes none of it.
	plain := NewRecord(outbox.Event{ID: "4", Relation: "public.outbox", AggregateID: "k", Topic: "t"}, NewStamp(5, at), nil)
	for _, h := range plain.Headers {
		if strings.HasPrefix(h.Key, "ce_") || h.Key == HeaderContentType {
			t.Errorf("outbox format wrote %s", h.Key)
		}
	}
}

func TestNewCloudEvents(t *testing.T) {
	for _, c := range []struct {
		format, source, conn string
		want                 *CloudEvents
		err                  string
	}{
		{"", "", "postgres://u@h/app", nil, ""},
		{"outbox", "", "postgres://u@h/app", nil, ""},
		{"outbox", "/x", "postgres://u@h/app", nil, "--ce-source is for --format cloudevents only"},
		{"json", "", "postgres://u@h/app", nil, `--format "json": use outbox or cloudevents`},
		{"cloudevents", "", "postgres://u@h/app?sslmode=disable", &CloudEvents{Database: "app"}, ""},
		{"cloudevents", "", "host=h user=relay dbname=shop", &CloudEvents{Database: "shop"}, ""},
		{"cloudevents", "", "postgres://relay@h", &CloudEvents{Database: "relay"}, ""}, // the server's default: the user's name
		{"cloudevents", "urn:example:orders", "postgres://u@h/app", &CloudEvents{Source: "urn:example:orders"}, ""},
		{"cloudevents", "%zz", "postgres://u@h/app", nil, "not a URI reference"},
	} {
		t.Setenv("PGDATABASE", "")
		pg, err := pgconn.ParseConfig(c.conn)
		if err != nil {
			t.Fatal(err)
		}
		got, err := NewCloudEvents(c.format, c.source, pg)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want %q", c, err, c.err)
			}
		case err != nil:
			t.Errorf("%+v: %v", c, err)
		case (got == nil) != (c.want == nil) || got != nil && *got != *c.want:
			t.Errorf("%+v: %+v, want %+v", c, got, c.want)
		}
	}
}

// Every header the cloudevents format writes is reserved, but for content-type: a row's own
// content-type is the event's data content type and replaces the default (one header).
func TestCloudEventsHeadersAreReserved(t *testing.T) {
	r := NewRecord(outbox.Event{ID: "1", Relation: "public.outbox", AggregateID: "k", Topic: "t", EventType: "e"}, NewStamp(5, time.Unix(1, 0)), &CloudEvents{Database: "d"})
	for _, h := range r.Headers {
		if h.Key == HeaderContentType {
			if ReservedHeader(h.Key) {
				t.Error("content-type is reserved")
			}
			continue
		}
		if !ReservedHeader(h.Key) {
			t.Errorf("header %q is written by sink but not reserved", h.Key)
		}
	}
}
