package outbox

import (
	"errors"
	"fmt"
	"strings"
)

// Profile is a named set of settings that makes the relay publish an outbox table the way
// another publisher does, record for record (docs/debezium.md). Explicit flags override it.
type Profile struct {
	Name string
	// Columns are the column roles of that publisher's default table.
	Columns Columns
	// TopicTemplate names each record's topic from the row's columns (ParseTopicTemplate).
	TopicTemplate string
	// IDHeader, when set, is a header that carries the outbox id's text, besides outbox-id.
	IDHeader string
	// NullPayloadTombstone publishes a NULL payload as a record with a null value (a
	// tombstone) instead of refusing the row.
	NullPayloadTombstone bool
}

// Debezium is the profile of Debezium's Outbox Event Router with its defaults, on Debezium's
// default outbox table (id uuid, aggregatetype, aggregateid, type, payload jsonb): topic
// outbox.event.<aggregatetype>, key aggregateid, value the payload's text, header "id", a NULL
// payload as a tombstone (EventRouter with route.tombstone.on.empty.payload=false still sends a
// null value, through a String converter).
var Debezium = Profile{
	Name: "debezium",
	Columns: Columns{ID: "id", AggregateID: "aggregateid", Topic: "aggregatetype", Payload: "payload",
		EventType: "type"},
	TopicTemplate:        "outbox.event.${aggregatetype}",
	IDHeader:             "id",
	NullPayloadTombstone: true,
}

// Profiles are the profiles --profile accepts, by name.
var Profiles = map[string]Profile{Debezium.Name: Debezium}

// ErrBadTopicTemplate means a topic template is malformed.
var ErrBadTopicTemplate = errors.New("bad topic template")

// TopicTemplate is a parsed topic template: literal text with ${column} placeholders, each
// replaced by that column's text. A '$' not followed by '{' is literal.
type TopicTemplate struct {
	lits []string // len(cols)+1 literal parts around the placeholders
	cols []string
}

// ParseTopicTemplate reads a template such as "outbox.event.${aggregatetype}". It needs at
// least one placeholder (a topic without one is --topic); a placeholder names a column, 1 to
// 63 bytes, and is closed by '}'.
func ParseTopicTemplate(s string) (TopicTemplate, error) {
	var t TopicTemplate
	rest := s
	lit := ""
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			break
		}
		lit += rest[:i]
		rest = rest[i+2:]
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			return TopicTemplate{}, fmt.Errorf("topic template %q: %w: \"${\" without a closing \"}\"", s, ErrBadTopicTemplate)
		}
		col := rest[:j]
		if col == "" || len(col) > maxIdentLen || strings.ContainsRune(col, 0) {
			return TopicTemplate{}, fmt.Errorf("topic template %q: %w: placeholder %q does not name a column (1 to %d bytes)",
				s, ErrBadTopicTemplate, "${"+col+"}", maxIdentLen)
		}
		t.lits = append(t.lits, lit)
		t.cols = append(t.cols, col)
		lit = ""
		rest = rest[j+1:]
	}
	t.lits = append(t.lits, lit+rest)
	if len(t.cols) == 0 {
		return TopicTemplate{}, fmt.Errorf("topic template %q: %w: it has no ${column} placeholder (for one topic for every row, use --topic)",
			s, ErrBadTopicTemplate)
	}
	return t, nil
}

// Columns returns the columns the template reads, in order (a column may repeat).
func (t TopicTemplate) Columns() []string { return t.cols }

// Append appends the topic for the placeholder values vals (one per Columns entry) to b.
func (t TopicTemplate) Append(b []byte, vals [][]byte) []byte {
	for i, lit := range t.lits {
		b = append(b, lit...)
		if i < len(t.cols) {
			b = append(b, vals[i]...)
		}
	}
	return b
}
