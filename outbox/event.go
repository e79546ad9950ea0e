package outbox

// Event is one outbox event: a row of an outbox table, or a logical message with the outbox
// prefix. The decoder fills it from the WAL, the polling publisher from a selected row, and the
// sink maps it to its Kafka record (sink.NewRecord), so both publishers produce the same record.
type Event struct {
	ID          string   // outbox id: the id column's decimal text; for a logical message the content's "id" or, absent, the message LSN as "X/Y"
	AggregateID string   // the Kafka key
	Topic       string   // the row's topic, or the configured fixed topic
	Payload     []byte   // the record value: the payload column's text, or a message's raw "payload" JSON (the decoder's aliases its input)
	EventType   string   // "" when absent/NULL
	Headers     []Header // the row's own: its headers object (ParseHeaders), sorted by key
	// Relation is the source, the outbox-table header: "schema.table" of the row, or
	// "message:<prefix>" for a logical message. Both publishers always set it.
	Relation string
}
