package record

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/contract"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// Record formats, the values of --format.
const (
	FormatOutbox      = "outbox"      // the record contract alone (the default)
	FormatCloudEvents = "cloudevents" // plus the CloudEvents Kafka binding's binary-mode headers
)

// CloudEvents header names (the CloudEvents Kafka protocol binding, binary content mode) and
// the values the relay writes that do not depend on the row.
const (
	HeaderCESpecVersion = contract.CESpecVersion // "ce_specversion"
	HeaderCEID          = contract.CEID          // "ce_id"
	HeaderCESource      = contract.CESource      // "ce_source"
	HeaderCEType        = contract.CEType        // "ce_type"
	HeaderCETime        = contract.CETime        // "ce_time"
	// HeaderContentType is the binding's datacontenttype. It is not reserved: a row's own
	// content-type header is the event's data content type and replaces the default.
	HeaderContentType = "content-type"

	CESpecVersion      = "1.0"
	DefaultContentType = "application/json" // the payload is jsonb (or a logical message's JSON)
	// BinaryContentType is the default of a bytea payload, whose value is its bytes.
	BinaryContentType = "application/octet-stream"
)

// CloudEvents makes NewRecord write a CloudEvent in binary content mode: the record's key,
// value and contract headers stay as they are, and these headers follow them:
//
//	ce_specversion  1.0
//	ce_id           <outbox-table>:<outbox-id>, e.g. "public.outbox:42" (stable across replays)
//	ce_source       Source, or "/cdc-relay/<Database>/<outbox-table>"
//	ce_type         the row's event type, or the outbox-table when it has none
//	ce_time         the cdc-commit-time value (RFC 3339, microseconds, UTC), when stamped
//	content-type    application/json (application/octet-stream for a bytea payload),
//	                unless the row's headers have a content-type
type CloudEvents struct {
	// Source is ce_source for every record; "" derives it from Database and the event's table.
	Source string
	// Database is the PostgreSQL database, part of the derived source.
	Database string
}

// NewCloudEvents returns the configuration of format ("" or FormatOutbox: nil, the plain
// contract; FormatCloudEvents) with source as ce_source ("" to derive it) and the database
// of pg (without a database, its user, as the server does).
func NewCloudEvents(format, source string, pg *pgconn.Config) (*CloudEvents, error) {
	switch format {
	case "", FormatOutbox:
		if source != "" {
			return nil, fmt.Errorf("--ce-source is for --format %s only", FormatCloudEvents)
		}
		return nil, nil
	case FormatCloudEvents:
	default:
		return nil, fmt.Errorf("--format %q: use %s or %s", format, FormatOutbox, FormatCloudEvents)
	}
	if source != "" {
		if _, err := url.Parse(source); err != nil {
			return nil, fmt.Errorf("--ce-source %q is not a URI reference: %w", source, err)
		}
		return &CloudEvents{Source: source}, nil
	}
	db := pg.Database
	if db == "" {
		db = pg.User
	}
	return &CloudEvents{Database: db}, nil
}

// Shared header values: a record's header values are never written to after produce.
var (
	ceSpecVersion   = []byte(CESpecVersion)
	contentTypeJSON = []byte(DefaultContentType)
	contentTypeBin  = []byte(BinaryContentType)
)

// source is ce_source for an event of table.
func (c *CloudEvents) source(table string) string {
	if c.Source != "" {
		return c.Source
	}
	return "/cdc-relay/" + url.PathEscape(c.Database) + "/" + url.PathEscape(table)
}

// appendHeaders appends the CloudEvents headers of e; commitTime is the stamp's value or nil.
func (c *CloudEvents) appendHeaders(h []kgo.RecordHeader, e *outbox.Event, commitTime []byte) []kgo.RecordHeader {
	typ := e.EventType
	if typ == "" {
		typ = e.Relation
	}
	src := c.source(e.Relation)
	// id and source in one allocation; type is the event's own string.
	buf := make([]byte, 0, len(e.Relation)+1+len(e.ID)+len(src))
	buf = append(append(append(buf, e.Relation...), ':'), e.ID...)
	id := buf[:len(buf):len(buf)]
	buf = append(buf, src...)
	h = append(h,
		kgo.RecordHeader{Key: HeaderCESpecVersion, Value: ceSpecVersion},
		kgo.RecordHeader{Key: HeaderCEID, Value: id},
		kgo.RecordHeader{Key: HeaderCESource, Value: buf[len(id):]},
		kgo.RecordHeader{Key: HeaderCEType, Value: []byte(typ)},
	)
	if commitTime != nil {
		h = append(h, kgo.RecordHeader{Key: HeaderCETime, Value: commitTime})
	}
	for _, rh := range e.Headers {
		if strings.EqualFold(rh.Key, HeaderContentType) {
			return h // the row's own, already among its headers
		}
	}
	if e.Binary {
		return append(h, kgo.RecordHeader{Key: HeaderContentType, Value: contentTypeBin})
	}
	return append(h, kgo.RecordHeader{Key: HeaderContentType, Value: contentTypeJSON})
}
