package decoder

import (
	"fmt"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// Config configures a Decoder.
type Config struct {
	// Columns names the outbox table's columns; zero fields take the defaults. The decoder
	// reads the first six (CreatedAt and PublishedAt are the poller's).
	Columns outbox.Columns
	// Tables, when non-empty, restricts decoding to these relations written "schema.table"
	// (a name without a schema means "public."; see outbox.ParseTable). Rows of other relations are ignored (KindNone).
	// Names are compared as the server reports them: unquoted identifiers are lower case.
	Tables []string
	// Topic, when non-empty, is the topic of every event and the topic column is not needed.
	Topic string
	// MessagePrefix is the prefix of pg_logical_emit_message events to publish; default "outbox".
	// Messages with other prefixes are ignored.
	MessagePrefix string
	// IgnoreMessages passes over every logical message, whatever its prefix. PostgreSQL sends a
	// message to every slot that asks for messages, whatever the publications' row filters, so
	// of an outbox split into shards only shard 0 publishes messages and the others set this.
	IgnoreMessages bool
	// NullPayload says what a row with a NULL payload becomes: a bad row (the zero value,
	// outbox.NullPayloadDeadLetter) or a tombstone, an event with a nil Payload.
	NullPayload outbox.NullPayload
	// TopicTemplate, when non-empty, names each row's topic from its columns
	// (outbox.ParseTopicTemplate, e.g. "outbox.event.${aggregatetype}"); the topic column is
	// not read. A NULL or missing placeholder column is a bad row. Not with Topic.
	TopicTemplate string
	// IDHeader, when non-empty, adds a header of that name carrying the outbox id's text
	// (Debezium's "id"); it must not be a reserved name (outbox.ErrReservedHeader).
	IDHeader string
}

const defaultMessagePrefix = "outbox"

// Validate reports a Config that New would refuse: an empty or malformed Tables entry.
// Zero column names and an empty MessagePrefix are valid: they take the defaults.
func (c Config) Validate() error {
	for i, t := range c.Tables {
		if _, err := outbox.ParseTable(t); err != nil {
			return fmt.Errorf("decoder: Tables[%d]: %w", i, err)
		}
	}
	return c.validateProfile()
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
func names(c outbox.Columns) [numRoles]string {
	c = c.WithDefaults()
	return [numRoles]string{roleID: c.ID, roleKey: c.AggregateID, roleTopic: c.Topic, rolePayload: c.Payload,
		roleEventType: c.EventType, roleHeaders: c.Headers}
}
