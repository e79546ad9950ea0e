package deadletters

import (
	"errors"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
)

// A CloudEvents dead letter carries its event's ce_* headers as dlq-ce_*; replayed, the record
// is the CloudEvent it was.
func TestReplayGivesACloudEventItsHeadersBack(t *testing.T) {
	ev := outbox.Event{ID: "1", Relation: "public.outbox", AggregateID: "k", Topic: "t", Payload: []byte{0, 0xff}, Binary: true, EventType: "order.created"}
	rec := record.NewRecord(ev, record.NewStamp(5, time.Unix(0, 0)), &record.CloudEvents{Database: "app"})
	dl := record.DeadLetter("dlq", rec, "public.outbox", errors.New("boom"))
	l := Letter{Headers: dl.Headers}
	got := map[string]string{}
	for _, h := range l.ReplayHeaders(time.Unix(1, 0)) {
		got[h.Key] = string(h.Value)
	}
	for _, h := range rec.Headers {
		if got[h.Key] != string(h.Value) {
			t.Errorf("replayed %s = %q, want %q", h.Key, got[h.Key], h.Value)
		}
	}
	for k := range got {
		if len(k) > 4 && k[:4] == "dlq-" {
			t.Errorf("replayed record has %s", k)
		}
	}
}
