package sink

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	// ErrNoBrokers means the configuration names no seed broker.
	ErrNoBrokers = errors.New("sink: no Kafka brokers configured")
	// ErrUnreachable means no seed broker answered a metadata request in time.
	ErrUnreachable = errors.New("sink: Kafka is unreachable")
)

// Rejected reports whether err means Kafka refused a record for good: retrying the same
// record cannot succeed (too large, invalid topic, not authorized, unknown topic after the
// configured retries). Such a record is dead-lettered instead of stalling the stream.
func Rejected(err error) bool {
	switch {
	case errors.Is(err, kerr.MessageTooLarge),
		errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidTopicException),
		errors.Is(err, kerr.TopicAuthorizationFailed),
		errors.Is(err, kerr.InvalidRecord),
		errors.Is(err, kerr.CorruptMessage),
		errors.Is(err, kerr.UnknownTopicOrPartition),
		errors.Is(err, kerr.UnknownTopicID),
		errors.Is(err, kerr.PolicyViolation):
		return true
	}
	return false
}

// Permanent reports whether err, from a Ping that used its whole time, is one that retrying
// with the same configuration cannot fix: a certificate that is not trusted or does not name the
// broker, TLS against a plaintext listener or the reverse, refused credentials, or a broker that
// closed every connection at its first read for the whole attempt (a listener spoken to in the
// wrong protocol), a topic of Config.Topics that does not exist. Anything else (a broker that is down, not answering, restarting) is worth
// waiting for.
func Permanent(err error) bool {
	var firstEOF *kgo.ErrFirstReadEOF
	var missing *TopicMissingError
	_, permanent := connectHint(err)
	return permanent || errors.As(err, &firstEOF) || errors.As(err, &missing)
}

// unreachableError names the brokers that did not answer and what to check.
type unreachableError struct {
	brokers []string
	err     error
}

func (e *unreachableError) Error() string {
	if hint, _ := connectHint(e.err); hint != "" {
		return fmt.Sprintf("sink: Kafka is unreachable at %v: %v (%s)", e.brokers, e.err, hint)
	}
	return fmt.Sprintf("sink: Kafka is unreachable at %v: %v (check that the broker runs and that --brokers names its advertised listener)", e.brokers, e.err)
}

func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.err} }
