package deadletters

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{"", time.Time{}, false},
		{"2026-05-01T10:00:00Z", time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), false},
		{"2026-05-01T10:00:00+02:00", time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC), false},
		{"2026-05-01", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), false},
		{"2026-05-01 10:30", time.Date(2026, 5, 1, 10, 30, 0, 0, time.UTC), false},
		{"2h", now.Add(-2 * time.Hour), false},
		{"90m", now.Add(-90 * time.Minute), false},
		{"3d", now.Add(-72 * time.Hour), false},
		{"-2h", time.Time{}, true},
		{"yesterday", time.Time{}, true},
		{"3dd", time.Time{}, true},
	} {
		got, err := ParseTime(c.in, now)
		if (err != nil) != c.bad || !got.Equal(c.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestParseID(t *testing.T) {
	for _, c := range []struct {
		topic bool
		id    string
		ok    bool
	}{
		{true, "0:17", true}, {true, "12:0", true}, {true, "17", false}, {true, "0:x", false}, {true, "-1:3", false}, {true, "0:1:2", false},
		{false, "42", true}, {false, "0", false}, {false, "0:17", false}, {false, "4x", false}, {false, "042", false},
	} {
		if err := ParseID(c.topic, c.id); (err == nil) != c.ok {
			t.Errorf("ParseID(topic=%v, %q) = %v, want ok %v", c.topic, c.id, err, c.ok)
		}
	}
}

func letter(id, outboxID, topic, class, errText string, seen time.Time, st State) *Letter {
	l := &Letter{ID: id, Seen: seen, State: st, Headers: []kgo.RecordHeader{
		{Key: "outbox-id", Value: []byte(outboxID)}, {Key: "outbox-table", Value: []byte("public.outbox")},
		{Key: "correlation-id", Value: []byte("c")},
		{Key: "dlq-error", Value: []byte(errText)}, {Key: "dlq-class", Value: []byte(class)}, {Key: "dlq-original-topic", Value: []byte(topic)},
	}}
	l.fill()
	return l
}

func TestSelectionAndGroups(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	ls := []*Letter{
		letter("0:0", "1", "orders", "MESSAGE_TOO_LARGE", "MESSAGE_TOO_LARGE: too big", t0, Pending),
		letter("0:1", "2", "missing", "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_OR_PARTITION: no", t0.Add(time.Hour), Pending),
		letter("0:2", "1", "orders", "MESSAGE_TOO_LARGE", "MESSAGE_TOO_LARGE: too big", t0.Add(2*time.Hour), Pending), // parked again
		letter("0:3", "3", "orders", "bad-row", "payload is NULL", t0.Add(3*time.Hour), Pending),
		letter("0:4", "4", "orders", "MESSAGE_TOO_LARGE", "MESSAGE_TOO_LARGE: too big", t0.Add(4*time.Hour), Replayed),
	}
	ids := func(ls []*Letter) string {
		var s []string
		for _, l := range ls {
			s = append(s, l.ID)
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		name string
		sel  Selection
		want string
	}{
		{"everything waiting", Selection{}, "0:0,0:1,0:2,0:3"},
		{"with handled", Selection{Handled: true}, "0:0,0:1,0:2,0:3,0:4"},
		{"reason substring, any case", Selection{Reason: "too_large"}, "0:0,0:2"},
		{"reason of a bad row", Selection{Reason: "bad row"}, "0:3"},
		{"topic", Selection{Topic: "missing"}, "0:1"},
		{"ids", Selection{IDs: []string{"0:2", "0:4"}}, "0:2"},
		{"outbox ids", Selection{OutboxIDs: []string{"1"}}, "0:0,0:2"},
		{"since inclusive, until exclusive", Selection{Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)}, "0:1,0:2"},
	} {
		if got := ids(c.sel.Filter(ls)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if (Selection{Handled: true}).Narrowed() || !(Selection{Reason: "x"}).Narrowed() {
		t.Error("Narrowed")
	}
	gs := GroupLetters(Selection{}.Filter(ls))
	if len(gs) != 3 || len(gs[0].Letters) != 2 || gs[0].OutboxID != "1" || gs[0].Source != "public.outbox" ||
		!gs[0].First.Equal(t0) || !gs[0].Last.Equal(t0.Add(2*time.Hour)) || gs[0].Reason != "MESSAGE_TOO_LARGE" || gs[2].Reason != "bad row" {
		t.Errorf("groups: %+v", gs)
	}
	h := ls[0].ReplayHeaders(t0)
	var keys []string
	for _, x := range h {
		keys = append(keys, x.Key)
	}
	if strings.Join(keys, ",") != "outbox-id,outbox-table,correlation-id,cdc-replayed-at" || string(h[3].Value) != "2026-05-01T00:00:00.000000Z" {
		t.Errorf("replay headers %v", h)
	}
}

func TestTallyString(t *testing.T) {
	var tl Tally
	tl.Replayed, tl.Skipped = 2, 1
	tl.refuse(CauseTooLarge)
	tl.refuse(CauseTopicMissing)
	tl.refuse(CauseTooLarge)
	if got := tl.String(); got != "replayed 2, refused 3 (too large: 2, topic missing: 1), skipped 1" {
		t.Errorf("%q", got)
	}
}
