package contract

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Header names the relay writes on every record (event-type only when the row has one,
// cdc-lsn only when the publisher knows the LSN).
const (
	OutboxID    = "outbox-id"
	OutboxTable = "outbox-table"
	AggregateID = "aggregate-id"
	EventType   = "event-type"
	LSN         = "cdc-lsn"
	CommitTime  = "cdc-commit-time"
	// ReplayedAt is added by `cdc-relay dead-letters replay` to a record it sends again.
	ReplayedAt = "cdc-replayed-at"
)

// W3C trace-context header names. They are not reserved: a row's own traceparent and
// tracestate are carried as they are, except that with tracing on (docs/tracing.md) a sampled
// producer span of the relay's replaces the record's traceparent (in place; names compare
// without regard to ASCII case) and its tracestate (the row's, inherited), or appends them to
// a record whose row had none. A consumer's extracted context is then the relay's span.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// Dead-letter header names, added to a parked record's headers. Every name that starts with
// DLQPrefix is reserved, including names the relay does not write yet.
const (
	DLQPrefix   = "dlq-"
	DLQError    = "dlq-error"
	DLQTopic    = "dlq-original-topic"
	DLQRelation = "dlq-relation"
	// DLQClass says why a record was parked, decided when it was parked: DLQClassBadRow, or
	// the name of the Kafka error that refused it (MESSAGE_TOO_LARGE, ...). `dead-letters
	// replay` reads it, never the prose of dlq-error.
	DLQClass = "dlq-class"
)

// DLQClassBadRow is the dlq-class of a row or message that could not become a record:
// replaying the same bytes cannot fix it, and its record (e.g. a null value, a tombstone on a
// compacted topic) must never be published.
const DLQClassBadRow = "bad-row"

// CloudEvents header names (the Kafka protocol binding's binary content mode), written with
// --format cloudevents. Every name that starts with CEPrefix is reserved, in either format:
// a consumer reads any ce_* header as an attribute or extension of the event.
const (
	CEPrefix      = "ce_"
	CESpecVersion = "ce_specversion"
	CEID          = "ce_id"
	CESource      = "ce_source"
	CEType        = "ce_type"
	CETime        = "ce_time"
)

// recordHeaders are the names Reserved refuses besides the dlq-* and ce_* names.
var recordHeaders = [...]string{OutboxID, OutboxTable, AggregateID, EventType, LSN, CommitTime, ReplayedAt}

// Reserved reports whether a row's own header (an outbox row's headers column, a logical
// message's "headers") may not be named name: a header of the record contract, any dlq-*
// name or any ce_* name (the CloudEvents binding's, written with --format cloudevents). Such a row header would stand beside the relay's own header of that name, and a
// consumer that reads the last one (Java's Headers.lastHeader) would read the row's.
//
// Names compare without regard to ASCII case. Kafka header keys are case-sensitive, so
// "Outbox-Id" would not shadow "outbox-id" for a Kafka client; but consumers that carry
// headers into case-insensitive maps (HTTP bridges and proxies, some frameworks' message
// headers) would conflate the two, and no legitimate row header needs such a name.
func Reserved(name string) bool {
	for _, n := range recordHeaders {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return hasPrefixFold(name, DLQPrefix) || hasPrefixFold(name, CEPrefix)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// ErrReserved is wrapped by ReservedError; outbox.ErrReservedHeader is the same value.
var ErrReserved = errors.New("reserved by the record contract")

// ReservedError is the bad-row reason for a row whose headers use the reserved names (in
// the order given; the callers sort them), e.g. `headers: "outbox-id" is reserved by the
// record contract`. It wraps ErrReserved.
func ReservedError(names []string) error {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	verb := "is"
	if len(names) > 1 {
		verb = "are"
	}
	return fmt.Errorf("headers: %s %s %w", strings.Join(q, ", "), verb, ErrReserved)
}
