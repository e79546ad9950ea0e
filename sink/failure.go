package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/record"
)

// Failure is what a record's failed produce means, as Classify decides it: the one
// classification the relay's and the poller's promises both use (DESIGN.md, "Retries are
// unlimited" and "Too large means too large alone"). Its zero value, Delivered, is no failure.
type Failure uint8

// The failures, from the harmless to the one that must stop confirmation.
const (
	// Delivered: Kafka acknowledged the record; no failure (Send's outcome).
	Delivered Failure = iota
	// Aborted: AbortBufferedRecords dropped the record (kgo.ErrAborting); whoever aborted knows
	// why and replays or forgets it.
	Aborted
	// Unbuffered: the context passed to Produce ended while the record waited for buffer space
	// (context.Canceled, DeadlineExceeded): it was never buffered.
	Unbuffered
	// Refused: Kafka refused the record itself for good (Rejected, and for a record too large,
	// too large on its own): dead-letter it, with the error Classify returns as its reason.
	Refused
	// Undelivered: anything else (the client closed, a producer failure, a batch refused as too
	// large although the record fits on its own because the topic's limit was lowered): the
	// record may well be deliverable, so it is neither dead-lettered nor passed.
	Undelivered
)

func (f Failure) String() string {
	switch f {
	case Delivered:
		return "delivered"
	case Aborted:
		return "aborted"
	case Unbuffered:
		return "unbuffered"
	case Refused:
		return "refused"
	case Undelivered:
		return "undelivered"
	}
	return "unknown"
}

// Classify says what err (not nil), the failure of r in its promise, means, and returns the
// error to report: for a Refused record it is the reason its dead letter carries, naming the
// limit it exceeds and the flag that sets it when it is too large; otherwise err.
func (s *Sink) Classify(r *kgo.Record, err error) (Failure, error) {
	switch {
	case errors.Is(err, kgo.ErrAborting):
		return Aborted, err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Unbuffered, err
	case s.rejectedAlone(r, err):
		return Refused, s.refusal(r, err)
	}
	return Undelivered, err
}

// Outcome is what became of a record given to Send: Delivered, or its failure with what the
// publisher needs to act on it.
type Outcome struct {
	Failure Failure
	// Err is nil when delivered; for a Refused record it is the reason its dead letter carries
	// (Classify's), otherwise the failure.
	Err error
	// Letter is a Refused record's dead letter (DeadLetter to LetterTo), ready to park; nil otherwise.
	Letter *kgo.Record
}

// outcome classifies r's promise error err (nil: delivered) for Send: as Classify does, but a
// record failed because the client closed is Unbuffered (the flush before Close ended before
// Kafka took it), a record given up has its producer span ended (TraceFailed), and a refused
// one carries its dead letter to, whose span goes on.
func (s *Sink) outcome(r *kgo.Record, err error, to record.LetterTo) Outcome {
	if err == nil {
		return Outcome{Failure: Delivered}
	}
	failure, err := s.Classify(r, err)
	if failure == Undelivered && errors.Is(err, kgo.ErrClientClosed) {
		failure = Unbuffered
	}
	switch failure {
	case Refused:
		return Outcome{Failure: Refused, Err: err, Letter: record.DeadLetter(to.Topic, r, to.Relation, err)}
	case Unbuffered, Undelivered:
		TraceFailed(r, err)
	}
	return Outcome{Failure: failure, Err: err}
}

// rejectedAlone reports whether err, the failure of r, means Kafka refused r itself for good:
// Rejected(err), and for a record too large, r alone exceeds its topic's limit. A batch
// refused as too large although r fits on its own (the topic's limit was lowered while the
// relay ran) is not r's fault: r must not be dead-lettered.
func (s *Sink) rejectedAlone(r *kgo.Record, err error) bool {
	if !Rejected(err) {
		return false
	}
	if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
		return s.limits.tooLargeAlone(r) || s.largerThanBuffer(r)
	}
	return true
}

// refusal is err, the failure of r that rejectedAlone accepted, with the limit r exceeds and the
// flag that sets it when it is too large: the reason a dead letter carries.
func (s *Sink) refusal(r *kgo.Record, err error) error {
	if errors.Is(err, kerr.InvalidTopicException) {
		// Kafka's text says only that the name is invalid; the relay's own check says which
		// character or rule it breaks, as it does for --topic and --dlq-topic.
		if nameErr := ValidTopicName(r.Topic); nameErr != nil {
			return fmt.Errorf("%w: %v", err, nameErr)
		}
		return err
	}
	if !errors.Is(err, kerr.MessageTooLarge) && !errors.Is(err, kerr.RecordListTooLarge) {
		return err
	}
	if s.largerThanBuffer(r) {
		return record.LargerThanBuffer(err, record.Size(r), int64(s.cfg.MaxBufferedBytes))
	}
	if s.limits.tooLargeAlone(r) {
		return fmt.Errorf("%w: the record (%d bytes of key, value and headers) does not fit a batch of its own under topic %s's "+
			"limit of %d bytes (its max.message.bytes, capped by --batch-max-bytes)", err, record.Size(r), r.Topic, s.limits.batchMax(r.Topic))
	}
	return err
}
