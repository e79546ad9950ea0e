package oracle

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/contract"
)

// Read returns the delivery a record is: its outbox-id header, key, the payload's tag (-1 if
// the payload has none: another writer's row) and where it was read. An error if the record
// has no numeric outbox id.
func Read(r *kgo.Record) (Delivery, error) {
	d := Delivery{Key: string(r.Key), N: -1, Partition: r.Partition, Offset: r.Offset, At: r.Timestamp}
	id := ""
	for _, h := range r.Headers {
		if h.Key == contract.OutboxID {
			id = string(h.Value)
		}
	}
	var err error
	if d.ID, err = strconv.ParseInt(id, 10, 64); err != nil || d.ID == 0 {
		return d, fmt.Errorf("oracle: record at %s/%d@%d has no outbox id (%q)", r.Topic, r.Partition, r.Offset, id)
	}
	var p struct {
		N *int `json:"n"`
	}
	if json.Unmarshal(r.Value, &p) == nil && p.N != nil {
		d.N = *p.N
	}
	return d, nil
}
