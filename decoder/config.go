package decoder

import (
	"fmt"
	"strings"
)

// Columns names the outbox table's columns. Zero fields take the defaults shown.
type Columns struct {
	ID          string // "id" (bigint; its decimal text becomes Event.ID)
	AggregateID string // "aggregate_id" (text, required non-NULL non-empty: the Kafka key)
	Topic       string // "topic" (text; required unless Config.Topic is set)
	Payload     string // "payload" (jsonb/text; the record value; NULL is a bad row)
	EventType   string // "event_type" (optional; used when the relation has it)
	Headers     string // "headers" (optional jsonb object; used when the relation has it)
}

// Config configures a Decoder.
type Config struct {
	// Columns names the outbox table's columns; zero fields take the defaults.
	Columns Columns
	// Tables, when non-empty, restricts decoding to these relations written "schema.table"
	// (a name without a schema means "public."). Rows of other relations are ignored (KindNone).
	// Names are compared as the server reports them: unquoted identifiers are lower case.
	Tables []string
	// Topic, when non-empty, is the topic of every event and the topic column is not needed.
	Topic string
	// MessagePrefix is the prefix of pg_logical_emit_message events to publish; default "outbox".
	// Messages with other prefixes are ignored.
	MessagePrefix string
}

const (
	defaultMessagePrefix = "outbox"
	defaultSchema        = "public"
)

// Validate reports a Config that New would refuse: an empty or malformed Tables entry.
// Zero column names and an empty MessagePrefix are valid: they take the defaults.
func (c Config) Validate() error {
	for i, t := range c.Tables {
		if t == "" || strings.HasPrefix(t, ".") || strings.HasSuffix(t, ".") {
			return fmt.Errorf("decoder: Tables[%d] = %q: want \"schema.table\" or \"table\"", i, t)
		}
	}
	return nil
}

// roles of the outbox columns, in the order bad rows are reported.
const (
	roleID = iota
	roleKey
	roleTopic
	rolePayload
	roleEventType
	roleHeaders
	numRoles
)

// names returns the column name of every role, defaults applied.
func (c Columns) names() [numRoles]string {
	pick := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	return [numRoles]string{
		roleID:        pick(c.ID, "id"),
		roleKey:       pick(c.AggregateID, "aggregate_id"),
		roleTopic:     pick(c.Topic, "topic"),
		rolePayload:   pick(c.Payload, "payload"),
		roleEventType: pick(c.EventType, "event_type"),
		roleHeaders:   pick(c.Headers, "headers"),
	}
}

// qualify writes a Tables entry as "schema.table".
func qualify(table string) string {
	if strings.Contains(table, ".") {
		return table
	}
	return defaultSchema + "." + table
}
