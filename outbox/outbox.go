package outbox

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
)

// DefaultTable is the outbox table when none is configured.
const DefaultTable = "public.outbox"

// maxIdentLen is NAMEDATALEN-1, the longest name the server keeps.
const maxIdentLen = slotfacts.MaxIdentLen

// ErrBadName means a name is malformed: a table name here, and a slot or publication name
// (slotfacts' name rules, which slotstore applies): one value, slotfacts.ErrBadName, and this
// is its one public name.
var ErrBadName = slotfacts.ErrBadName

// Table is a schema-qualified table name, taken literally (no case folding: unquoted
// identifiers are stored in lower case, and that is how they must be written here).
type Table struct {
	Schema, Name string
}

// ParseTable reads "schema.table", or "table" meaning public.table (never resolved through a
// search_path). Each part is 1 to 63 bytes without '.' or NUL; the error wraps ErrBadName.
func ParseTable(s string) (Table, error) {
	schema, name, found := strings.Cut(s, ".")
	if !found {
		schema, name = "public", s
	}
	for _, part := range []string{schema, name} {
		if part == "" || len(part) > maxIdentLen || strings.ContainsAny(part, ".\x00") {
			return Table{}, fmt.Errorf("table %q: %w: want \"schema.table\" or \"table\", each part 1 to %d bytes",
				s, ErrBadName, maxIdentLen)
		}
	}
	return Table{Schema: schema, Name: name}, nil
}

// String returns "schema.table", unquoted: the form of WAL relation names, of
// pg_publication_tables and of the outbox-table header.
func (t Table) String() string { return t.Schema + "." + t.Name }

// Sanitize returns the quoted "schema"."table" for SQL.
func (t Table) Sanitize() string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }

// Columns names the outbox table's columns. Zero fields take the defaults shown.
type Columns struct {
	ID          string // "id" (ordered, unique; its text becomes the outbox-id header)
	AggregateID string // "aggregate_id" (the Kafka key; NULL or empty is a bad row)
	Topic       string // "topic" (required unless a fixed topic is configured)
	Payload     string // "payload" (the record value: bytea as its bytes, text, varchar, json, jsonb as text; NULL is a bad row or a tombstone, NullPayload)
	EventType   string // "event_type" (optional; used when the table has it)
	Headers     string // "headers" (optional jsonb object, see ParseHeaders; used when the table has it)
	CreatedAt   string // "created_at" (polling, prune: the row's time; poll's cdc-commit-time)
	PublishedAt string // "published_at" (polling: NULL means pending)
}

// WithDefaults returns c with every empty name set to its default.
func (c Columns) WithDefaults() Columns {
	return Columns{ID: cmp.Or(c.ID, "id"), AggregateID: cmp.Or(c.AggregateID, "aggregate_id"), Topic: cmp.Or(c.Topic, "topic"),
		Payload: cmp.Or(c.Payload, "payload"), EventType: cmp.Or(c.EventType, "event_type"), Headers: cmp.Or(c.Headers, "headers"),
		CreatedAt: cmp.Or(c.CreatedAt, "created_at"), PublishedAt: cmp.Or(c.PublishedAt, "published_at")}
}
