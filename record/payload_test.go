package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/outbox"
)

func TestBytesPayloadIsTheValueAndOctetStream(t *testing.T) {
	b := []byte{0x0a, 0x00, 0xff, 0x80}
	ev := outbox.Event{ID: "1", Relation: "public.outbox", AggregateID: "k", Topic: "t", Payload: b, Binary: true}
	r := NewRecord(ev, NewStamp(5, time.Unix(0, 0)), &CloudEvents{Database: "app"})
	if !bytes.Equal(r.Value, b) {
		t.Errorf("value %x, want %x", r.Value, b)
	}
	if ct := string(Header(r, HeaderContentType)); ct != BinaryContentType {
		t.Errorf("content-type %q, want %s", ct, BinaryContentType)
	}
	ev.Headers = []outbox.Header{{Key: "Content-Type", Value: []byte("application/x-protobuf")}}
	r = NewRecord(ev, NewStamp(5, time.Unix(0, 0)), &CloudEvents{Database: "app"})
	var cts []string
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, HeaderContentType) {
			cts = append(cts, h.Key+"="+string(h.Value))
		}
	}
	if len(cts) != 1 || cts[0] != "content-type=application/x-protobuf" {
		t.Errorf("content-type headers %q, want the row's own alone", cts)
	}
	ev.Binary, ev.Headers = false, nil
	if ct := string(Header(NewRecord(ev, nil, &CloudEvents{Database: "app"}), HeaderContentType)); ct != DefaultContentType {
		t.Errorf("text payload: content-type %q, want %s", ct, DefaultContentType)
	}
}

func TestTombstoneEventIsANullValue(t *testing.T) {
	r := NewRecord(outbox.Event{ID: "1", AggregateID: "k", Topic: "t"}, nil, nil)
	if r.Value != nil {
		t.Errorf("value %#v, want nil", r.Value)
	}
	r = NewRecord(outbox.Event{ID: "1", AggregateID: "k", Topic: "t", Payload: []byte{}}, nil, nil)
	if r.Value == nil {
		t.Error("empty payload became a null value")
	}
}

func TestCloudEventsDeadLetterIsNoCloudEvent(t *testing.T) {
	ev := outbox.Event{ID: "1", Relation: "public.outbox", AggregateID: "k", Topic: "t", Payload: []byte(`{}`), EventType: "order.created"}
	r := NewRecord(ev, NewStamp(5, time.Unix(0, 0)), &CloudEvents{Database: "app"})
	dl := DeadLetter("dlq", r, "public.outbox", errors.New("boom"))
	for _, h := range dl.Headers {
		if strings.HasPrefix(strings.ToLower(h.Key), "ce_") {
			t.Errorf("dead letter has %s=%s", h.Key, h.Value)
		}
	}
	if got := string(Header(dl, "dlq-ce_type")); got != "order.created" {
		t.Errorf("dlq-ce_type = %q, want the original ce_type", got)
	}
	if got := string(Header(r, HeaderCEType)); got != "order.created" {
		t.Errorf("the original record lost ce_type: %q", got)
	}
}
