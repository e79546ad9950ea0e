package record

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// Builder turns a publisher's events into records and decides, before anything is sent, which
// must be dead-lettered instead. It is configured once, from the sink's configuration.
type Builder struct {
	// CloudEvents is the --format cloudevents configuration (sink.Config.CloudEvents), passed to
	// NewRecord; nil: the plain record contract.
	CloudEvents *CloudEvents
	// MaxBytes is the most the producer may buffer (sink.Config.MaxBufferedBytes, as
	// Sink.Limits returns it): a record larger than that on its own is refused.
	MaxBytes int64
}

// Publication is the record an event becomes (Builder.Build) and, when it must not be sent, its
// dead letter: what a publisher decides on before it sends the record or parks the letter.
type Publication struct {
	// Record is the event's record (NewRecord).
	Record *kgo.Record
	// To is where Record's dead letter goes if it is refused, here or by Kafka.
	To LetterTo
	// Refusal, when not nil, says that Record must not be sent, and why: the row could not
	// become a record (the bad row's error), or Record alone is more than the producer may
	// buffer. Letter is then its dead letter, to To; both are nil when Record may be sent.
	Refusal error
	Letter  *kgo.Record
}

// Build builds ev's record (NewRecord, with stamp and b.CloudEvents) and decides whether it may
// be sent: badRow, when not nil, is why the row could not become a record, and the record is
// dead-lettered instead; so is a record more than b.MaxBytes on its own, which franz-go would
// fail at once, after Produce returned. A record that fits may be sent, with its dead letter to
// to if Kafka refuses it for good.
func (b Builder) Build(ev outbox.Event, stamp *Stamp, to LetterTo, badRow error) Publication {
	p := Publication{Record: NewRecord(ev, stamp, b.CloudEvents), To: to}
	refusal := badRow
	if refusal == nil {
		if refusal = b.tooLarge(p.Record); refusal == nil {
			return p
		}
	}
	p.Refusal, p.Letter = refusal, DeadLetter(to.Topic, p.Record, to.Relation, refusal)
	return p
}

// tooLarge returns the error franz-go would fail r with at once, before buffering it, because r
// alone (key, value and headers) is more than b.MaxBytes; nil if it fits.
func (b Builder) tooLarge(r *kgo.Record) error {
	size := Size(r)
	if size <= b.MaxBytes {
		return nil
	}
	return LargerThanBuffer(fmt.Errorf("%w (uncompressed_bytes=%d)", kerr.MessageTooLarge, size), size, b.MaxBytes)
}

// LargerThanBuffer is err, the refusal of a record of size bytes (Size) that is more than the
// producer may buffer (maxBytes, --max-buffered-bytes), with what to do about it: the reason
// its dead letter carries, whether Build refused it or franz-go did.
func LargerThanBuffer(err error, size, maxBytes int64) error {
	return fmt.Errorf("%w: the record is %d bytes (key, value and headers), more than the producer may buffer "+
		"(--max-buffered-bytes %d); raise --max-buffered-bytes above it to publish such records", err, size, maxBytes)
}
