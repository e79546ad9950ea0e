package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
)

// sendOne sends one small record to topic t of s with ctx and returns its outcome.
func sendOne(t *testing.T, ctx context.Context, s *Sink, to record.LetterTo) (*kgo.Record, Outcome) {
	t.Helper()
	rec := &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("x")}
	type sent struct {
		rec *kgo.Record
		o   Outcome
	}
	done := make(chan sent, 1)
	s.Send(ctx, rec, to, func(r *kgo.Record, o Outcome) { done <- sent{r, o} })
	select {
	case got := <-done:
		if got.rec != rec {
			t.Fatalf("outcome for record %p, want the record sent (%p)", got.rec, rec)
		}
		return got.rec, got.o
	case <-time.After(20 * time.Second):
		t.Fatal("no outcome within 20s")
		return nil, Outcome{}
	}
}

// Send's outcome is the one decision a publisher acts on: what Classify says, with a Refused
// record's dead letter made, and nothing else carrying a letter.
func TestSendDecidesTheOutcome(t *testing.T) {
	to := record.LetterTo{Topic: "dlq", Relation: "public.outbox"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("delivered", func(t *testing.T) {
		_, o := sendOne(t, ctx, fakeCluster(t, 0, 0), to)
		if o.Failure != Delivered || o.Err != nil || o.Letter != nil {
			t.Fatalf("outcome %v (%v, letter %v), want delivered with no error nor letter", o.Failure, o.Err, o.Letter)
		}
	})
	t.Run("refused", func(t *testing.T) {
		rec, o := sendOne(t, ctx, fakeCluster(t, kerr.InvalidRecord.Code, 1000), to)
		if o.Failure != Refused || !errors.Is(o.Err, kerr.InvalidRecord) || o.Letter == nil {
			t.Fatalf("outcome %v (%v, letter %v), want refused with InvalidRecord and a letter", o.Failure, o.Err, o.Letter)
		}
		if o.Letter.Topic != "dlq" || string(o.Letter.Key) != "k" || string(o.Letter.Value) != "x" {
			t.Fatalf("letter %q %q %q, want the record's key and value on dlq", o.Letter.Topic, o.Letter.Key, o.Letter.Value)
		}
		for k, v := range map[string]string{record.HeaderDLQError: o.Err.Error(), record.HeaderDLQTopic: rec.Topic, record.HeaderDLQRelation: "public.outbox", record.HeaderDLQClass: record.LetterClass(o.Err)} {
			if got := string(record.Header(o.Letter, k)); got != v {
				t.Errorf("letter's %s = %q, want %q", k, got, v)
			}
		}
	})
	t.Run("a batch too large although the record fits is undelivered", func(t *testing.T) {
		_, o := sendOne(t, ctx, fakeCluster(t, kerr.MessageTooLarge.Code, 1000), to)
		if o.Failure != Undelivered || !errors.Is(o.Err, kerr.MessageTooLarge) || o.Letter != nil {
			t.Fatalf("outcome %v (%v, letter %v), want undelivered with MessageTooLarge and no letter", o.Failure, o.Err, o.Letter)
		}
	})
	t.Run("a context ended before it buffered is unbuffered", func(t *testing.T) {
		s := fakeCluster(t, 0, 0)
		ended, end := context.WithCancel(ctx)
		end()
		_, o := sendOne(t, ended, s, to)
		if o.Failure != Unbuffered || !errors.Is(o.Err, context.Canceled) || o.Letter != nil {
			t.Fatalf("outcome %v (%v, letter %v), want unbuffered with context.Canceled", o.Failure, o.Err, o.Letter)
		}
	})
	t.Run("a closed client is unbuffered", func(t *testing.T) {
		s := fakeCluster(t, 0, 0)
		sendOne(t, ctx, s, to) // the topic's limit is known: Send goes straight to the client
		s.Close()
		_, o := sendOne(t, ctx, s, to)
		if o.Failure != Unbuffered || !errors.Is(o.Err, kgo.ErrClientClosed) || o.Letter != nil {
			t.Fatalf("outcome %v (%v, letter %v), want unbuffered with ErrClientClosed", o.Failure, o.Err, o.Letter)
		}
	})
}

// A record more than the producer may buffer is refused before it is produced, with its dead
// letter and a reason that names --max-buffered-bytes; a record that fits is not.
func TestOversizedRecordIsRefusedWithItsLetter(t *testing.T) {
	s, err := New(Config{Brokers: []string{"127.0.0.1:1"}, MaxBufferedBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	to := record.LetterTo{Topic: "dlq", Relation: "public.outbox"}
	if o, refused := s.Oversized(&kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("x")}, to); refused {
		t.Fatalf("a 2-byte record refused under a 64-byte buffer: %v", o.Err)
	}
	big := &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte(strings.Repeat("v", 64))}
	o, refused := s.Oversized(big, to)
	if !refused || o.Failure != Refused || !errors.Is(o.Err, kerr.MessageTooLarge) || !strings.Contains(o.Err.Error(), "--max-buffered-bytes 64") {
		t.Fatalf("oversized record: refused %v, outcome %v (%v), want refused with MessageTooLarge naming --max-buffered-bytes 64", refused, o.Failure, o.Err)
	}
	if o.Letter == nil || o.Letter.Topic != "dlq" || string(record.Header(o.Letter, record.HeaderDLQTopic)) != "t" || string(record.Header(o.Letter, record.HeaderDLQError)) != o.Err.Error() {
		t.Fatalf("oversized record's letter %+v, want one on dlq from t carrying the reason", o.Letter)
	}
}

// Build makes the event's record and decides at once what the publisher does with it: a bad row
// and a record more than the producer may buffer come with their dead letters and must not be
// sent; any other record may be.
func TestBuildRefusesBadRowsAndOversizedRecordsWithTheirLetters(t *testing.T) {
	s, err := New(Config{Brokers: []string{"127.0.0.1:1"}, MaxBufferedBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	to := record.LetterTo{Topic: "dlq", Relation: "public.outbox"}
	stamp := record.NewStamp(0x16B3748, time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	ev := outbox.Event{ID: "7", Relation: "public.outbox", Topic: "orders", AggregateID: "k1", Payload: []byte("{}")}

	p := s.Build(ev, stamp, to, nil)
	if p.Refused.Failure != Delivered || p.Refused.Letter != nil || p.Record.Topic != "orders" || string(p.Record.Key) != "k1" ||
		string(record.Header(p.Record, record.HeaderLSN)) != "0/16B3748" {
		t.Fatalf("a small event: refused %v (letter %v), record %+v; want its record, to be sent", p.Refused.Failure, p.Refused.Letter, p.Record)
	}

	var bad error = &outbox.RowError{Relation: "public.outbox", ID: "7", Column: "topic", Err: errors.New("empty")}
	p = s.Build(ev, stamp, to, bad)
	if p.Refused.Failure != Refused || p.Refused.Err != bad || p.Refused.Letter == nil || p.Refused.Letter.Topic != "dlq" ||
		string(record.Header(p.Refused.Letter, record.HeaderDLQClass)) != "bad-row" || string(record.Header(p.Refused.Letter, record.HeaderDLQRelation)) != "public.outbox" {
		t.Fatalf("a bad row: refused %v (%v), letter %+v; want refused with its bad-row letter on dlq", p.Refused.Failure, p.Refused.Err, p.Refused.Letter)
	}

	ev.Payload = []byte(strings.Repeat("v", 256))
	p = s.Build(ev, stamp, to, nil)
	if p.Refused.Failure != Refused || !errors.Is(p.Refused.Err, kerr.MessageTooLarge) || p.Refused.Letter == nil ||
		string(record.Header(p.Refused.Letter, record.HeaderDLQTopic)) != "orders" || string(record.Header(p.Refused.Letter, record.HeaderOutboxID)) != "7" {
		t.Fatalf("an oversized event: refused %v (%v), letter %+v; want refused with MessageTooLarge and its letter from orders", p.Refused.Failure, p.Refused.Err, p.Refused.Letter)
	}
}
