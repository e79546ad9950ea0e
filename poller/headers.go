package poller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/internal/contract"
)

// parseHeaders turns a headers JSON object into Kafka headers sorted by key, exactly as the
// relay's decoder does: a string value becomes its unescaped text, any other value its JSON
// text; JSON null means no headers; anything else that is not an object is
// decoder.ErrBadHeaders. Reserved names (internal/contract: the record contract's headers and
// every dlq-* name, in any case) make the row bad with decoder.ErrReservedHeader, the other
// headers kept for the dead letter. The input is the column's text output, the same bytes the
// relay reads from the WAL, so both publishers make the same headers and refuse the same rows.
func parseHeaders(data []byte) ([]kgo.RecordHeader, error) {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil, nil
	}
	if len(data) == 0 || data[0] != '{' {
		return nil, decoder.ErrBadHeaders
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", decoder.ErrBadHeaders, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	hs := make([]kgo.RecordHeader, 0, len(m))
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
				return nil, fmt.Errorf("%w: header %q: %w", decoder.ErrBadHeaders, k, err)
			}
			v = []byte(s)
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: v})
	}
	slices.SortFunc(hs, func(a, b kgo.RecordHeader) int { return strings.Compare(a.Key, b.Key) })
	if reserved != nil {
		if len(hs) == 0 {
			hs = nil
		}
		slices.Sort(reserved)
		return hs, contract.ReservedError(reserved)
	}
	return hs, nil
}
