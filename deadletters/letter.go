package deadletters

import (
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/contract"
)

// HeaderReplayedAt is added to a replayed record: when `dead-letters replay` sent it again
// (RFC 3339, microseconds, UTC). A replayed event arrives after later events of its key.
const HeaderReplayedAt = contract.ReplayedAt

// State is what has been done to a letter.
type State string

// The states: a letter is pending until it is replayed or discarded.
const (
	Pending   State = "pending"
	Replayed  State = "replayed"
	Discarded State = "discarded"
)

// Letter is one parked record.
type Letter struct {
	ID       string // "partition:offset" on the topic, the row id in the table
	OutboxID string
	Source   string // the outbox table (outbox-table header, else dlq-relation)
	Topic    string // the original topic
	Key      []byte
	Value    []byte
	Headers  []kgo.RecordHeader // as parked: the original ones plus dlq-*
	Error    string
	// Class is why it was parked, as the relay decided it then (the dlq-class header, the
	// table's class column): contract.DLQClassBadRow, or the Kafka error that refused it.
	// "" for a letter an older relay parked without one: see Unclassified.
	Class string
	LSN   string
	Seen  time.Time // when it was parked
	Slot  string    // table letters only

	Partition int32 // topic letters only
	Offset    int64
	TopicID   string // topic letters only: the dead-letter topic's ID ("" if the broker has none)

	State     State
	HandledAt time.Time // when replayed or discarded
}

// ReasonUnclassified is the Reason of a letter parked without a class (Unclassified).
const ReasonUnclassified = "unclassified"

// Reason is a short name for why the letter was parked, from its recorded class (never from
// the error's text): the Kafka error (MESSAGE_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION, ...), "bad
// row" for a row that could not become a record, or "unclassified".
func (l *Letter) Reason() string {
	switch l.Class {
	case "":
		return ReasonUnclassified
	case contract.DLQClassBadRow:
		return "bad row"
	}
	return l.Class
}

// BadRow reports whether the letter is a row that could not become a record: no Kafka refusal
// caused it, and replaying the same bytes cannot fix it.
func (l *Letter) BadRow() bool { return l.Class == contract.DLQClassBadRow }

// Unclassified reports whether the letter carries no class: an older relay parked it, and
// whether it is a bad row (whose record must never be published) is not known.
func (l *Letter) Unclassified() bool { return l.Class == "" }

// Size is what the record takes in a batch of its own, as the sink counts it.
func (l *Letter) Size(headers []kgo.RecordHeader) int64 {
	n := int64(len(l.Key) + len(l.Value) + 61 + 5*8)
	for _, h := range headers {
		n += int64(len(h.Key)+len(h.Value)) + 10
	}
	return n
}

// ReplayHeaders returns the original headers (every dlq-* one removed) plus cdc-replayed-at.
// The CloudEvents headers a dead letter carries as dlq-ce_* (record.DeadLetter) get their ce_*
// names back: the replayed record is the CloudEvent it was.
func (l *Letter) ReplayHeaders(at time.Time) []kgo.RecordHeader {
	h := make([]kgo.RecordHeader, 0, len(l.Headers)+1)
	for _, x := range l.Headers {
		if len(x.Key) >= len(contract.DLQPrefix) && strings.EqualFold(x.Key[:len(contract.DLQPrefix)], contract.DLQPrefix) {
			if ce := x.Key[len(contract.DLQPrefix):]; strings.HasPrefix(ce, contract.CEPrefix) {
				h = append(h, kgo.RecordHeader{Key: ce, Value: x.Value})
			}
			continue
		}
		if x.Key == HeaderReplayedAt { // a letter of a replayed record: one stamp, the new one
			continue
		}
		h = append(h, x)
	}
	return append(h, kgo.RecordHeader{Key: HeaderReplayedAt, Value: []byte(at.UTC().Format("2006-01-02T15:04:05.000000Z07:00"))})
}

// Record returns the record to replay.
func (l *Letter) Record(at time.Time) *kgo.Record {
	return &kgo.Record{Topic: l.Topic, Key: l.Key, Value: l.Value, Headers: l.ReplayHeaders(at)}
}

func header(hs []kgo.RecordHeader, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// fill sets the fields the headers carry.
func (l *Letter) fill() {
	for _, f := range []struct {
		field  *string
		header string
	}{
		{&l.OutboxID, contract.OutboxID},
		{&l.Source, contract.OutboxTable},
		{&l.Source, contract.DLQRelation}, // when no outbox-table header: the relation it names
		{&l.Topic, contract.DLQTopic},
		{&l.Error, contract.DLQError},
		{&l.Class, contract.DLQClass},
		{&l.LSN, contract.LSN},
	} {
		if *f.field == "" {
			*f.field = header(l.Headers, f.header)
		}
	}
}

// eventKey tells one event from another: a letter parked twice for one event (a relay that
// replayed from its slot) has the same source, outbox id, topic, cdc-lsn (its transaction's),
// key and value; an outbox id reused after TRUNCATE ... RESTART IDENTITY comes with another
// transaction's cdc-lsn, and from `poll` (no cdc-lsn) with other bytes, most likely.
type eventKey struct{ source, outboxID, topic, lsn, key, value string }

func (l *Letter) event() eventKey {
	return eventKey{l.Source, l.OutboxID, l.Topic, l.LSN, string(l.Key), string(l.Value)}
}

// Group is the letters of one event (Letter.event: source table, outbox id, original topic,
// cdc-lsn, key and value) parked for one
// reason in one state: the same event may be parked more than once (a relay that replayed
// from its slot, a replay refused again).
type Group struct {
	Reason, Source, OutboxID, Topic, LSN string
	State                                State
	First, Last                          time.Time
	Letters                              []*Letter
}

// GroupLetters groups letters, in the order of their first letter.
func GroupLetters(ls []*Letter) []*Group {
	type key struct {
		reason string
		event  eventKey
		state  State
	}
	idx := map[key]*Group{}
	var out []*Group
	for _, l := range ls {
		k := key{l.Reason(), l.event(), l.State}
		if l.OutboxID == "" { // nothing to tell two such letters apart by: each its own group
			k.event.outboxID = "\x00" + l.ID
		}
		g := idx[k]
		if g == nil {
			g = &Group{Reason: k.reason, Source: l.Source, OutboxID: l.OutboxID, Topic: l.Topic, LSN: l.LSN, State: l.State, First: l.Seen, Last: l.Seen}
			idx[k] = g
			out = append(out, g)
		}
		g.Letters = append(g.Letters, l)
		if l.Seen.Before(g.First) {
			g.First = l.Seen
		}
		if l.Seen.After(g.Last) {
			g.Last = l.Seen
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].First.Before(out[j].First) })
	return out
}
