package poller

import (
	"context"
	"errors"
	"fmt"

	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/schema"
)

// Schema is `poll --value-format avro|protobuf|json-schema|wire`: each row's payload becomes
// its record's value in a schema registry's wire format when the row is selected, before the
// batch is produced (and before its Kafka transaction, exactly-once).
type Schema struct {
	Encoder schema.ValueEncoder // a *schema.Encoder
	Metrics *metrics.Schema     // nil: none

	paused bool // the last cycle failed because the registry did not answer (cycles run one at a time)
}

// encode writes pd's value in the wire format. A payload that does not fit its schema makes pd
// the row's dead letter, a bad row with the subject and schema id. A registry that does not
// answer fails the cycle (an *schema.UnavailableError, retryable): the rows stay pending, and
// Run retries with backoff, so nothing is skipped or dead-lettered for it. A
// *schema.ConfigError fails it for good (IsRetryable).
func (p *Poller) encode(ctx context.Context, pd pending) (pending, error) {
	sc := p.cfg.Schema
	if sc == nil || pd.dlq || pd.rec.Value == nil {
		return pd, nil // a tombstone's null value is null in every format
	}
	rec := pd.rec
	v, err := sc.Encoder.Encode(ctx, rec.Topic, string(record.Header(rec, record.HeaderEventType)), rec.Value)
	if err == nil || !schema.Retriable(err) {
		if sc.paused {
			sc.paused = false
			sc.Metrics.Paused(false)
			p.log.Info("reading resumed: the schema registry answers")
		}
	}
	var pe *schema.PayloadError
	switch {
	case err == nil:
		rec.Value = v
		return pd, nil
	case errors.As(err, &pe):
		bad := &outbox.RowError{Relation: p.tbl.String(), ID: pd.id, Column: p.cfg.Columns.WithDefaults().Payload, Err: err}
		p.stats.BadRows.Add(1)
		p.cfg.Metrics.ProduceError(metrics.ClassBadRow)
		p.log.Error("bad row: dead-lettering it", "outbox_id", pd.id, "cause", bad)
		letter := schema.LetterHeaders(record.DeadLetter(p.cfg.DLQTopic, rec, p.tbl.String(), bad), bad)
		return pending{id: pd.id, rec: letter, dlq: true}, nil
	case schema.Retriable(err):
		if !sc.paused {
			sc.paused = true
			sc.Metrics.Paused(true)
			p.log.Warn("reading paused: schema registry unavailable", "outbox_id", pd.id, "cause", err)
		}
	}
	return pd, fmt.Errorf("poller: value of outbox id %s for topic %s: %w", pd.id, rec.Topic, err)
}
