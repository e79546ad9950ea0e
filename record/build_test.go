package record

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// A record more than the producer may buffer is refused before it is produced, with its dead
// letter and a reason that names --max-buffered-bytes; a record that fits is not.
func TestOversizedRecordIsRefusedWithItsLetter(t *testing.T) {
	b := Builder{MaxBytes: 64}
	to := LetterTo{Topic: "dlq", Relation: "public.outbox"}
	if err := b.tooLarge(&kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("x")}); err != nil {
		t.Fatalf("a 2-byte record refused under a 64-byte buffer: %v", err)
	}
	big := &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte(strings.Repeat("v", 64))}
	err := b.tooLarge(big)
	if err == nil || !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), "--max-buffered-bytes 64") {
		t.Fatalf("oversized record: refused with %v, want MessageTooLarge naming --max-buffered-bytes 64", err)
	}
	p := b.Build(outbox.Event{ID: "7", Topic: "t", AggregateID: "k", Payload: []byte(strings.Repeat("v", 64))}, nil, to, nil)
	if !errors.Is(p.Refusal, kerr.MessageTooLarge) || !strings.Contains(p.Refusal.Error(), "--max-buffered-bytes 64") {
		t.Fatalf("oversized event: refused with %v, want MessageTooLarge naming --max-buffered-bytes 64", p.Refusal)
	}
	if p.Letter == nil || p.Letter.Topic != "dlq" || string(Header(p.Letter, HeaderDLQTopic)) != "t" || string(Header(p.Letter, HeaderDLQError)) != p.Refusal.Error() {
		t.Fatalf("oversized record's letter %+v, want one on dlq from t carrying the reason", p.Letter)
	}
}

// Build makes the event's record and decides at once what the publisher does with it: a bad row
// and a record more than the producer may buffer come with their dead letters and must not be
// sent; any other record may be.
func TestBuildRefusesBadRowsAndOversizedRecordsWithTheirLetters(t *testing.T) {
	b := Builder{MaxBytes: 256}
	to := LetterTo{Topic: "dlq", Relation: "public.outbox"}
	stamp := NewStamp(0x16B3748, time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	ev := outbox.Event{ID: "7", Relation: "public.outbox", Topic: "orders", AggregateID: "k1", Payload: []byte("{}")}

	p := b.Build(ev, stamp, to, nil)
	if p.Refusal != nil || p.Letter != nil || p.Record.Topic != "orders" || string(p.Record.Key) != "k1" ||
		string(Header(p.Record, HeaderLSN)) != "0/16B3748" || p.To != to {
		t.Fatalf("a small event: refused %v (letter %v), record %+v; want its record, to be sent", p.Refusal, p.Letter, p.Record)
	}

	var bad error = &outbox.RowError{Relation: "public.outbox", ID: "7", Column: "topic", Err: errors.New("empty")}
	p = b.Build(ev, stamp, to, bad)
	if p.Refusal != bad || p.Letter == nil || p.Letter.Topic != "dlq" ||
		string(Header(p.Letter, HeaderDLQClass)) != "bad-row" || string(Header(p.Letter, HeaderDLQRelation)) != "public.outbox" {
		t.Fatalf("a bad row: refused %v, letter %+v; want refused with its bad-row letter on dlq", p.Refusal, p.Letter)
	}

	ev.Payload = []byte(strings.Repeat("v", 256))
	p = b.Build(ev, stamp, to, nil)
	if !errors.Is(p.Refusal, kerr.MessageTooLarge) || p.Letter == nil ||
		string(Header(p.Letter, HeaderDLQTopic)) != "orders" || string(Header(p.Letter, HeaderOutboxID)) != "7" {
		t.Fatalf("an oversized event: refused %v, letter %+v; want refused with MessageTooLarge and its letter from orders", p.Refusal, p.Letter)
	}
}
