package decoder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// parseHeaders turns a headers JSON object into headers sorted by key: a string value becomes
// its unescaped text, any other value its JSON text. JSON null means no headers; anything else
// that is not an object is ErrBadHeaders.
func parseHeaders(data []byte) ([]Header, error) {
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
	for k, raw := range m {
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
	return hs, nil
}
