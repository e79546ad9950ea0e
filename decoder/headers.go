package decoder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cdc-relay/cdc-relay/internal/contract"
)

// ErrReservedHeader means the headers object uses a name of the record contract: outbox-id,
// outbox-table, aggregate-id, event-type, cdc-lsn, cdc-commit-time or any dlq-* name, in any
// ASCII case. A row header of that name would stand beside the relay's own and shadow it for
// a consumer that reads the last one (Java's Headers.lastHeader), so the row is a bad row,
// never published with two. The reason names the headers, e.g.
// `headers: "outbox-id" is reserved by the record contract`. The list is internal/contract's,
// which is where sink takes its header names from.
var ErrReservedHeader = contract.ErrReserved

// parseHeaders turns a headers JSON object into headers sorted by key: a string value becomes
// its unescaped text, any other value its JSON text. JSON null means no headers; anything else
// that is not an object is ErrBadHeaders. An object that uses reserved names returns the
// other headers (for the dead letter, which carries the relay's own headers once) and an error
// wrapping ErrReservedHeader that names the reserved ones, sorted.
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
