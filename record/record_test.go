package record

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/outbox"
)

func TestNewRecordFollowsTheContract(t *testing.T) {
	ct := time.Date(2026, 11, 29, 10, 11, 12, 345678000, time.FixedZone("x", 3600))
	r := NewRecord(outbox.Event{
		ID: "42", Relation: "app.outbox", AggregateID: "order-7", Topic: "brew.orders.v1", Payload: []byte(`{"a": 1}`),
		EventType: "order.created", Headers: []outbox.Header{{Key: "traceparent", Value: []byte("00-1")}},
	}, NewStamp(pglogrepl.LSN(0x16B3748), ct), nil)
	if r.Topic != "brew.orders.v1" || string(r.Key) != "order-7" || string(r.Value) != `{"a": 1}` {
		t.Fatalf("topic/key/value: %q %q %q", r.Topic, r.Key, r.Value)
	}
	want := []string{"outbox-id=42", "outbox-table=app.outbox", "aggregate-id=order-7", "event-type=order.created", "traceparent=00-1",
		"cdc-lsn=0/16B3748", "cdc-commit-time=2026-11-29T09:11:12.345678Z"}
	wantHeaders(t, r, want)
}

func TestNewRecordWithoutLSNOrEventType(t *testing.T) {
	// The polling publisher has no LSN: no cdc-lsn header; no event type: no event-type header.
	r := NewRecord(outbox.Event{ID: "1", AggregateID: "a", Topic: "t"}, NewStamp(0, time.Unix(0, 0)), nil)
	for _, h := range r.Headers {
		if h.Key == HeaderLSN || h.Key == HeaderEventType {
			t.Errorf("unexpected header %s", h.Key)
		}
	}
	if Header(r, HeaderCommitTime) == nil {
		t.Error("cdc-commit-time missing")
	}
}

// Ids are unique per outbox table only: two tables' id 1 must be two records a consumer can
// tell apart.
func TestOutboxTableTellsEqualIDsApart(t *testing.T) {
	stamp := NewStamp(5, time.Unix(1, 0))
	a := NewRecord(outbox.Event{ID: "1", Relation: "a.outbox", AggregateID: "k", Topic: "t"}, stamp, nil)
	b := NewRecord(outbox.Event{ID: "1", Relation: "b.outbox", AggregateID: "k", Topic: "t"}, stamp, nil)
	m := NewRecord(outbox.Event{ID: "1", Relation: "message:outbox", AggregateID: "k", Topic: "t"}, stamp, nil)
	for want, r := range map[string]*kgo.Record{"a.outbox": a, "b.outbox": b, "message:outbox": m} {
		if got := string(Header(r, HeaderOutboxTable)); got != want {
			t.Errorf("outbox-table %q, want %q", got, want)
		}
		if r.Headers[1].Key != HeaderOutboxTable {
			t.Errorf("header 1 is %q, want outbox-table right after outbox-id", r.Headers[1].Key)
		}
	}
}

// Every header the relay writes, on a record or a dead letter, is a name a row may not use
// for its own headers: the list in internal/contract and the headers
// record writes cannot drift apart.
func TestEveryContractHeaderIsReserved(t *testing.T) {
	r := NewRecord(outbox.Event{ID: "1", Relation: "public.outbox", AggregateID: "k", Topic: "t", EventType: "e",
		Headers: []outbox.Header{{Key: "correlation-id", Value: []byte("c")}}}, NewStamp(5, time.Unix(1, 0)), nil)
	d := DeadLetter("dlq", r, "public.outbox", errors.New("boom"))
	seen := 0
	for _, h := range d.Headers {
		if h.Key == "correlation-id" {
			if ReservedHeader(h.Key) {
				t.Errorf("the row's header %q is reserved", h.Key)
			}
			continue
		}
		seen++
		if !ReservedHeader(h.Key) {
			t.Errorf("header %q is written by record but not reserved", h.Key)
		}
	}
	if seen != 10 {
		t.Errorf("%d contract headers on the dead letter, want 10: %v", seen, d.Headers)
	}
	for _, n := range []string{HeaderOutboxID, HeaderOutboxTable, HeaderAggregateID, HeaderEventType, HeaderLSN,
		HeaderCommitTime, HeaderDLQError, HeaderDLQClass, HeaderDLQTopic, HeaderDLQRelation, "dlq-future", "Outbox-Id"} {
		if !ReservedHeader(n) {
			t.Errorf("%q is not reserved", n)
		}
	}
}

func TestDeadLetterKeepsTheOriginal(t *testing.T) {
	orig := NewRecord(outbox.Event{ID: "9", AggregateID: "k", Topic: "bad topic", Payload: []byte("v")}, NewStamp(5, time.Unix(1, 0)), nil)
	d := DeadLetter("dlq", orig, "public.outbox", errors.New("boom"))
	if d.Topic != "dlq" || string(d.Key) != "k" || string(d.Value) != "v" {
		t.Fatalf("dead letter %q %q %q", d.Topic, d.Key, d.Value)
	}
	for k, v := range map[string]string{HeaderOutboxID: "9", HeaderLSN: "0/5", HeaderDLQError: "boom", HeaderDLQClass: ClassRejected, HeaderDLQTopic: "bad topic", HeaderDLQRelation: "public.outbox"} {
		if got := string(Header(d, k)); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

// A letter's class is decided from the error's type when it is parked, never from its text: a
// bad row whose outbox id reads like a Kafka error code is still a bad row, and replay reads
// the class instead of guessing from dlq-error.
func TestLetterClassComesFromTheErrorsType(t *testing.T) {
	bad := &outbox.RowError{ID: "ORDER_42_CREATED", Column: "payload", Err: outbox.ErrNullPayload}
	for _, c := range []struct {
		err  error
		want string
	}{
		{bad, "bad-row"},
		{fmt.Errorf("wrapped: %w", bad), "bad-row"},
		{kerr.MessageTooLarge, "MESSAGE_TOO_LARGE"},
		{fmt.Errorf("produce: %w", kerr.UnknownTopicOrPartition), "UNKNOWN_TOPIC_OR_PARTITION"},
		{errors.New("INVALID_TOPIC_EXCEPTION in prose only"), ClassRejected},
	} {
		if got := LetterClass(c.err); got != c.want {
			t.Errorf("LetterClass(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestStampFormatsLikePostgres(t *testing.T) {
	ct := time.Date(2026, 11, 29, 23, 59, 58, 123456789, time.FixedZone("x", 3600))
	for _, lsn := range []pglogrepl.LSN{1, 0xF, 0x10, 0x16B3748, 0xABCDEF0123456789, 0xFFFFFFFFFFFFFFFF, 0x100000000} {
		s := NewStamp(lsn, ct)
		h := s.headers()
		if len(h) != 2 || h[0].Key != HeaderLSN || string(h[0].Value) != lsn.String() {
			t.Errorf("lsn %s: headers %q", lsn, h)
			continue
		}
		if want := ct.UTC().Format(CommitTimeLayout); h[1].Key != HeaderCommitTime || string(h[1].Value) != want {
			t.Errorf("commit time %q, want %q", h[1].Value, want)
		}
		// The two values share a buffer: appending to one must not write into the other.
		_ = append(h[0].Value, 'X')
		if string(h[1].Value) != ct.UTC().Format(CommitTimeLayout) {
			t.Errorf("cdc-lsn's value overlaps cdc-commit-time's: %q", h[1].Value)
		}
	}
}

// The stamp formats the commit time itself (appendCommitTime): it must write exactly what
// time.Format writes with CommitTimeLayout, for any instant and zone.
func TestCommitTimeFormatsLikeTheLayout(t *testing.T) {
	times := []time.Time{
		time.Unix(0, 0), time.Unix(1, 999), time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("x", -12*3600)), time.Date(0, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 15, 12, 0, 0, 0, time.UTC), time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(2024, 2, 29, 7, 8, 9, 10000, time.FixedZone("y", 5*3600+1800)),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		times = append(times, time.Unix(rng.Int64N(400*365*86400)-100*365*86400, rng.Int64N(1e9)).In(time.FixedZone("z", rng.IntN(86400)-43200)))
	}
	for _, ct := range times {
		if got, want := string(appendCommitTime([]byte("x"), ct)), "x"+ct.UTC().Format(CommitTimeLayout); got != want {
			t.Fatalf("%v: %q, want %q", ct, got, want)
		}
	}
}

func BenchmarkNewStamp(b *testing.B) {
	at := time.Date(2026, 12, 1, 20, 30, 0, 123456000, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		NewStamp(0x16B3748, at)
	}
}

// wantHeaders checks a record's headers, key=value in order, against want.
func wantHeaders(t *testing.T, r *kgo.Record, want []string) {
	t.Helper()
	if len(r.Headers) != len(want) {
		t.Fatalf("headers %v, want %v", r.Headers, want)
	}
	for i, h := range r.Headers {
		if got := h.Key + "=" + string(h.Value); got != want[i] {
			t.Errorf("header %d = %s, want %s", i, got, want[i])
		}
	}
}
