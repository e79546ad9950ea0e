package sink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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
