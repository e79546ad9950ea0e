package outbox

// Event is one outbox event: a row of an outbox table, or a logical message with the outbox
// prefix. The decoder fills it from the WAL, the polling publisher from a selected row, and the
// package record maps it to its Kafka record (record.NewRecord), so both publishers produce the
// same record.
type Event struct {
	ID          string // outbox id: the id column's decimal text; for a logical message the content's "id" or, absent, the message LSN as "X/Y"
	AggregateID string // the Kafka key
	Topic       string // the row's topic, or the configured fixed topic
	// Payload is the record value: a bytea payload column's bytes, another payload column's
	// text (the decoder's aliases its input), or a message's raw "payload" JSON. Nil only for a
	// NULL payload published as a tombstone (NullPayloadTombstone): a null value. An empty
	// payload is an empty, non-nil value.
	Payload   []byte
	Binary    bool     // Payload is a bytea column's bytes (CloudEvents: application/octet-stream)
	EventType string   // "" when absent/NULL
	Headers   []Header // the row's own: its headers object (ParseHeaders), sorted by key
	// Relation is the source, the outbox-table header: "schema.table" of the row, or
	// "message:<prefix>" for a logical message. Both publishers always set it.
	Relation string
}
