package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/schema"
)

// Schema is `run --value-format avro|protobuf|json-schema|wire`: each event's payload becomes
// its record's value in a schema registry's wire format before the record is made (and, in
// exactly-once mode, before it enters the Kafka transaction).
type Schema struct {
	Encoder schema.ValueEncoder // a *schema.Encoder
	Metrics *metrics.Schema     // nil: none
	// Backoff paces the retries while the registry does not answer. Default 250ms doubling to 10s.
	Backoff retry.Backoff
}

// encodeValue turns ev's payload into its wire-format value in place. A payload that does not
// fit its schema is returned as badRow, an *outbox.RowError that wraps the *schema.PayloadError
// (subject, schema id, what does not fit): the row is dead-lettered like any bad row. A
// registry that does not answer is a fault, never a bad row: the pipeline waits here, on its
// own goroutine, which pauses reading (DESIGN.md, "Backpressure") while the replication
// goroutine keeps answering the server; it retries with backoff and resumes by itself. A stop
// or a halted session while it waits returns ok false with ev untouched: the caller produces
// nothing, so the event's transaction stays unacknowledged. A
// *schema.ConfigError (credentials refused, a subject the registry does not know) is err: the
// relay stops without confirming past the event.
func (r *Relay) encodeValue(ctx context.Context, ev *outbox.Event, lsn pglogrepl.LSN) (badRow error, ok bool, err error) {
	sc := r.cfg.Schema
	enc := sc.Encoder
	bo := sc.Backoff
	if bo.Max <= 0 {
		bo = retry.Backoff{Min: 250 * time.Millisecond, Max: 10 * time.Second, Jitter: true}
	}
	paused := false
	defer func() {
		if paused {
			sc.Metrics.Paused(false)
		}
	}()
	for attempt := 0; ; attempt++ {
		v, err := enc.Encode(ctx, ev.Topic, ev.EventType, ev.Payload)
		if err == nil {
			if paused {
				r.log.Info("reading resumed: the schema registry answers", "topic", ev.Topic, "outbox_id", ev.ID)
			}
			ev.Payload = v
			return nil, true, nil
		}
		if ctx.Err() != nil || r.halted() {
			return nil, false, nil
		}
		var pe *schema.PayloadError
		if errors.As(err, &pe) {
			return &outbox.RowError{LSN: lsn, Relation: ev.Relation, ID: ev.ID, Column: r.payloadColumn(ev), Err: err}, true, nil
		}
		if !schema.Retriable(err) {
			return nil, false, fmt.Errorf("relay: value of outbox id %s for topic %s: %w", ev.ID, ev.Topic, err)
		}
		wait := bo.Delay(attempt)
		if !paused {
			paused = true
			sc.Metrics.Paused(true)
			r.log.Warn("reading paused: schema registry unavailable", "topic", ev.Topic, "outbox_id", ev.ID, "retry_in", wait.Round(time.Millisecond), "cause", err)
		}
		if err := r.waitRegistry(ctx, wait); err != nil || ctx.Err() != nil || r.halted() {
			return nil, false, err
		}
	}
}

// waitRegistry waits d, or until ctx ends. An exactly-once Kafka transaction that falls due
// meanwhile is committed (it holds only records before the waiting one), so that a long outage
// does not run it into its transaction timeout.
func (r *Relay) waitRegistry(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			return nil
		case <-r.track.failCh:
			return nil // the pipeline returns the failure after this message
		case <-r.delivery.due():
			if err := r.delivery.tick(ctx, true); err != nil {
				return err
			}
		}
	}
}

// payloadColumn is the column (or logical message field) a payload came from.
func (r *Relay) payloadColumn(ev *outbox.Event) string {
	if strings.HasPrefix(ev.Relation, "message:") {
		return "payload"
	}
	return r.cfg.Decoder.Columns.WithDefaults().Payload
}
