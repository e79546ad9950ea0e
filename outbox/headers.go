package outbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cdc-relay/cdc-relay/internal/contract"
)

// Header is one record header from a row's headers object.
type Header struct {
	Key   string
	Value []byte
}

// ParseHeaders turns a headers JSON object (the column's text) into headers sorted by key: a
// string value becomes its unescaped text, any other value its JSON text. JSON null means no
// headers; anything else that is not an object is ErrBadHeaders. An object that uses reserved
// names returns the other headers (for the dead letter, which carries the publisher's own
// headers once) and an error wrapping ErrReservedHeader that names the reserved ones, sorted.
func ParseHeaders(data []byte) ([]Header, error) {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil, nil
	}
	if len(data) == 0 || data[0] != '{' {
		return nil, ErrBadHeaders
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadHeaders, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	hs := make([]Header, 0, len(m))
	var reserved []string
	for k, raw := range m {
		if contract.Reserved(k) {
			reserved = append(reserved, k)
			continue
		}
		v := []byte(raw)
		if len(raw) > 0 && raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("%w: header %q: %w", ErrBadHeaders, k, err)
			}
			v = []byte(s)
		}
		hs = append(hs, Header{Key: k, Value: v})
	}
	slices.SortFunc(hs, func(a, b Header) int { return strings.Compare(a.Key, b.Key) })
	if reserved != nil {
		if len(hs) == 0 {
			hs = nil
		}
		slices.Sort(reserved)
		return hs, contract.ReservedError(reserved)
	}
	return hs, nil
}
