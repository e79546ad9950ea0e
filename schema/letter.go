package schema

import (
	"errors"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/contract"
)

// Dead-letter headers of a payload that does not fit its schema, beside dlq-error (whose text
// names them too). Both are dlq-* names, which the record contract reserves: a row's own
// headers can never take them.
const (
	HeaderDLQSubject  = contract.DLQPrefix + "schema-subject" // "dlq-schema-subject"
	HeaderDLQSchemaID = contract.DLQPrefix + "schema-id"      // "dlq-schema-id": decimal, absent when no schema was found
)

// LetterHeaders adds dlq-schema-subject and dlq-schema-id to letter, a dead-letter record, when
// cause is (or wraps) a *PayloadError with a subject; it returns letter.
func LetterHeaders(letter *kgo.Record, cause error) *kgo.Record {
	var pe *PayloadError
	if letter == nil || !errors.As(cause, &pe) || pe.Subject == "" {
		return letter
	}
	letter.Headers = append(letter.Headers, kgo.RecordHeader{Key: HeaderDLQSubject, Value: []byte(pe.Subject)})
	if pe.SchemaID != 0 {
		letter.Headers = append(letter.Headers, kgo.RecordHeader{Key: HeaderDLQSchemaID, Value: strconv.AppendInt(nil, int64(pe.SchemaID), 10)})
	}
	return letter
}
