package record

import (
	"errors"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/contract"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// Header names of the record contract (README, "The Kafka record"). The names live in
// internal/contract, which also says which names a row's own headers may not take (all of
// these, and every dlq-* name): the decoder and the poller refuse such rows as bad rows.
const (
	HeaderOutboxID    = contract.OutboxID    // "outbox-id"
	HeaderOutboxTable = contract.OutboxTable // "outbox-table": the source, "schema.table" or "message:<prefix>"
	HeaderAggregateID = contract.AggregateID // "aggregate-id"
	HeaderEventType   = contract.EventType   // "event-type"
	HeaderLSN         = contract.LSN         // "cdc-lsn"
	HeaderCommitTime  = contract.CommitTime  // "cdc-commit-time"

	// Dead-letter headers, added to the original headers of a parked record.
	HeaderDLQError    = contract.DLQError    // "dlq-error"
	HeaderDLQTopic    = contract.DLQTopic    // "dlq-original-topic"
	HeaderDLQRelation = contract.DLQRelation // "dlq-relation"
	HeaderDLQClass    = contract.DLQClass    // "dlq-class": LetterClass of the cause
)

// ReservedHeader reports whether a row's own header may not be named name, because the
// record contract uses it (compared without regard to ASCII case; see contract.Reserved).
func ReservedHeader(name string) bool { return contract.Reserved(name) }

// CommitTimeLayout is RFC 3339 with microseconds, the precision of a Postgres timestamp.
const CommitTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// Stamp is a transaction's position headers, cdc-lsn and cdc-commit-time, formatted once and
// shared by all of its records (header values are never written to after produce).
type Stamp struct {
	h [2]kgo.RecordHeader
	n int
}

func (s *Stamp) headers() []kgo.RecordHeader { return s.h[:s.n] }

// commitTime is the cdc-commit-time value, RFC 3339 (always the stamp's last header).
func (s *Stamp) commitTime() []byte { return s.h[s.n-1].Value }

// NewStamp formats the position of a transaction committed at lsn (its commit record) and
// commitTime. A zero lsn means none (polling): the stamp then carries only cdc-commit-time.
// Both values share one buffer: with one-row transactions this runs once per record.
func NewStamp(lsn pglogrepl.LSN, commitTime time.Time) *Stamp {
	s := &Stamp{}
	buf := make([]byte, 0, 17+len(CommitTimeLayout)+6)
	if lsn != 0 {
		buf = appendLSN(buf, lsn)
		s.h[0] = kgo.RecordHeader{Key: HeaderLSN, Value: buf[:len(buf):len(buf)]}
		s.n = 1
	}
	start := len(buf)
	buf = appendCommitTime(buf, commitTime)
	s.h[s.n] = kgo.RecordHeader{Key: HeaderCommitTime, Value: buf[start:]}
	s.n++
	return s
}

// appendCommitTime appends t in UTC as CommitTimeLayout formats it, without interpreting the
// layout: with one-row transactions this runs once per record, and time.AppendFormat was most
// of a stamp's cost. Years outside 0-9999 take AppendFormat's own rendering.
func appendCommitTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, CommitTimeLayout)
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, 'Z')
}

// appendDigits appends v's n lowest decimal digits, zero-padded.
func appendDigits(b []byte, v, n int) []byte {
	var tmp [8]byte
	for i := n - 1; i >= 0; i-- {
		tmp[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, tmp[:n]...)
}

// appendLSN appends lsn as PostgreSQL writes it (pglogrepl.LSN.String): upper-case hex,
// "%X/%X".
func appendLSN(b []byte, lsn pglogrepl.LSN) []byte {
	b = appendHex(b, uint32(lsn>>32))
	b = append(b, '/')
	return appendHex(b, uint32(lsn))
}

func appendHex(b []byte, v uint32) []byte {
	const digits = "0123456789ABCDEF"
	var tmp [8]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = digits[v&0xF]
		v >>= 4
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

// NewRecord maps an outbox event to its Kafka record per the contract: the event's topic, key =
// aggregate id, value = payload, headers outbox-id, outbox-table (when Relation is set),
// aggregate-id, event-type (when present), the row's own headers, then the stamp's cdc-lsn
// (when known) and cdc-commit-time: stamp is its transaction's position, required of both
// publishers. Consumers dedupe by (outbox-table, outbox-id): ids are unique per table only. The
// row's headers are expected to use no reserved name (ReservedHeader): the publishers
// dead-letter such rows before they get here. With ce (--format cloudevents; the publishers
// pass their sink.Config.CloudEvents) the CloudEvents headers follow (see CloudEvents); the key and
// value stay.
func NewRecord(e outbox.Event, stamp *Stamp, ce *CloudEvents) *kgo.Record {
	n := 6 + len(e.Headers)
	if ce != nil {
		n += 6
	}
	h := make([]kgo.RecordHeader, 0, n)
	key := []byte(e.AggregateID) // the key and the aggregate-id header share it
	h = append(h, kgo.RecordHeader{Key: HeaderOutboxID, Value: []byte(e.ID)})
	if e.Relation != "" {
		h = append(h, kgo.RecordHeader{Key: HeaderOutboxTable, Value: []byte(e.Relation)})
	}
	h = append(h, kgo.RecordHeader{Key: HeaderAggregateID, Value: key})
	if e.EventType != "" {
		h = append(h, kgo.RecordHeader{Key: HeaderEventType, Value: []byte(e.EventType)})
	}
	for _, rh := range e.Headers {
		if ce != nil && rh.Key != HeaderContentType && strings.EqualFold(rh.Key, HeaderContentType) {
			// The binding's datacontenttype is the header content-type, in that case: a row's
			// Content-Type is its value, under the binding's name (DESIGN.md, "A record names").
			rh.Key = HeaderContentType
		}
		h = append(h, kgo.RecordHeader(rh))
	}
	var commitTime []byte
	if stamp != nil {
		h = append(h, stamp.headers()...)
		commitTime = stamp.commitTime()
	}
	if ce != nil {
		h = ce.appendHeaders(h, &e, commitTime)
	}
	return &kgo.Record{
		Topic:   e.Topic,
		Key:     key,
		Value:   e.Payload,
		Headers: h,
	}
}

// LetterTo is where a refused record's dead letter goes and what it says of its source: the
// dead-letter topic and the relation its row came from (DeadLetter's arguments).
type LetterTo struct{ Topic, Relation string }

// DeadLetter returns the record that parks r on the dead-letter topic: the original key,
// value and headers, plus the error, its class (LetterClass), the original topic and, when
// known, the relation. The outbox id and LSN travel in r's own headers. The dead letter keeps
// r's Context, and with it r's producer span (Config.Tracing), which ends when it is parked.
// A dead letter is no CloudEvent: r's ce_* headers travel renamed dlq-ce_*, so that a
// CloudEvents consumer of the dead-letter topic does not take it for an event of its type;
// `dead-letters replay` gives them back their names.
func DeadLetter(dlqTopic string, r *kgo.Record, relation string, cause error) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(r.Headers)+4)
	for _, x := range r.Headers {
		if strings.HasPrefix(x.Key, contract.CEPrefix) {
			x.Key = contract.DLQPrefix + x.Key
		}
		h = append(h, x)
	}
	h = append(h,
		kgo.RecordHeader{Key: HeaderDLQError, Value: []byte(cause.Error())},
		kgo.RecordHeader{Key: HeaderDLQClass, Value: []byte(LetterClass(cause))},
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
	)
	if relation != "" {
		h = append(h, kgo.RecordHeader{Key: HeaderDLQRelation, Value: []byte(relation)})
	}
	return &kgo.Record{Topic: dlqTopic, Key: r.Key, Value: r.Value, Headers: h, Context: r.Context}
}

// ClassRejected is the class LetterClass gives a refusal that carries no Kafka error code.
const ClassRejected = "rejected"

// LetterClass is the dlq-class of a record parked for cause, decided from the error's type,
// never its text: contract.DLQClassBadRow for a row that could not become a record
// (outbox.RowError), else the name of the Kafka error that refused it (MESSAGE_TOO_LARGE,
// UNKNOWN_TOPIC_OR_PARTITION, ...), else ClassRejected.
func LetterClass(cause error) string {
	if outbox.IsBadRow(cause) {
		return contract.DLQClassBadRow
	}
	var ke *kerr.Error
	if errors.As(cause, &ke) {
		return ke.Message
	}
	return ClassRejected
}

// Header returns the value of the first header named key, or nil.
func Header(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// Size is what franz-go counts of a record against the producer's buffer (the sink's
// MaxBufferedBytes): its key, its value, and its headers' keys and values.
func Size(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}
