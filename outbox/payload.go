package outbox

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// The payload column's types, and what each becomes as the record value: a bytea column's
// bytes exactly (0x00 and invalid UTF-8 included), the text of a text, varchar, json or jsonb
// column. Any other type is refused at start (PayloadTypeError).
const (
	OIDBytea   = 17
	OIDText    = 25
	OIDJSON    = 114
	OIDVarchar = 1043
	OIDJSONB   = 3802
)

// PayloadTypes lists the payload column types the publishers take, for messages.
const PayloadTypes = "bytea, text, varchar, json, jsonb"

// PayloadTypeOID reports whether a payload column of type oid is published, and whether its
// value is binary (bytea) rather than text.
func PayloadTypeOID(oid uint32) (ok, binary bool) {
	switch oid {
	case OIDBytea:
		return true, true
	case OIDText, OIDJSON, OIDVarchar, OIDJSONB:
		return true, false
	}
	return false, false
}

// PayloadTypeName is PayloadTypeOID for a type as format_type writes it ("bytea",
// "character varying(200)", ...).
func PayloadTypeName(formatType string) (ok, binary bool) {
	switch {
	case formatType == "bytea":
		return true, true
	case formatType == "text", formatType == "json", formatType == "jsonb",
		formatType == "character varying", strings.HasPrefix(formatType, "character varying("):
		return true, false
	}
	return false, false
}

// PayloadTypeError is the start-up refusal of a payload column of another type: its rows
// would be published as that type's text, which is no format a consumer expects.
func PayloadTypeError(flagName, column, table, formatType string) error {
	return fmt.Errorf("--%s %s: column %q of %s is of type %s; the payload column must be one of %s "+
		"(bytea is published as its bytes, the others as their text): change the column's type or map another column",
		flagName, column, column, table, formatType, PayloadTypes)
}

// ErrBadBytea means a bytea payload's text is neither PostgreSQL's hex nor its escape output.
var ErrBadBytea = errors.New("bytea value is not in PostgreSQL's hex or escape output format")

// DecodeBytea returns the bytes of a bytea value's text output, hex (`\x0a05...`, the default
// bytea_output) or escape (`\012\005hello`). It appends to dst[:0], growing it once at most:
// no allocation per byte. The result is never nil, so an empty bytea stays a non-null value.
func DecodeBytea(dst, text []byte) ([]byte, error) {
	if len(text) >= 2 && text[0] == '\\' && text[1] == 'x' {
		hex := text[2:]
		if len(hex)%2 != 0 {
			return nil, ErrBadBytea
		}
		out := grow(dst, len(hex)/2)
		for i := 0; i < len(hex); i += 2 {
			hi, lo := unhex(hex[i]), unhex(hex[i+1])
			if hi > 15 || lo > 15 {
				return nil, ErrBadBytea
			}
			out = append(out, hi<<4|lo)
		}
		return out, nil
	}
	out := grow(dst, len(text))
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		switch {
		case i+1 < len(text) && text[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(text) && isOctal(text[i+1]) && text[i+1] <= '3' && isOctal(text[i+2]) && isOctal(text[i+3]):
			out = append(out, (text[i+1]-'0')<<6|(text[i+2]-'0')<<3|(text[i+3]-'0'))
			i += 3
		default:
			return nil, ErrBadBytea
		}
	}
	return out, nil
}

func grow(dst []byte, n int) []byte {
	if cap(dst) < n || dst == nil {
		return make([]byte, 0, n)
	}
	return dst[:0]
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// unhex returns c's value as a hex digit, or 255.
func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

// NullPayload is what a publisher does with a row whose payload is NULL (--null-payload).
type NullPayload string

const (
	// NullPayloadDeadLetter makes such a row a bad row (ErrNullPayload), dead-lettered: the default.
	NullPayloadDeadLetter NullPayload = "dead-letter"
	// NullPayloadTombstone publishes it as a record with a null value, which deletes its key
	// from a compacted topic.
	NullPayloadTombstone NullPayload = "tombstone"
)

// Tombstone reports whether a NULL payload becomes a null value.
func (n NullPayload) Tombstone() bool { return n == NullPayloadTombstone }

// String implements flag.Value.
func (n *NullPayload) String() string {
	if n == nil {
		return ""
	}
	return string(*n)
}

// Set implements flag.Value.
func (n *NullPayload) Set(v string) error {
	switch NullPayload(v) {
	case NullPayloadDeadLetter, NullPayloadTombstone:
		*n = NullPayload(v)
		return nil
	}
	return fmt.Errorf("%q: use %s (a NULL payload is a bad row) or %s (a record with a null value, which deletes the key from a compacted topic)",
		v, NullPayloadDeadLetter, NullPayloadTombstone)
}

var _ flag.Value = (*NullPayload)(nil)
