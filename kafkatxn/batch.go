package kafkatxn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// PollTransactionalID is the default transactional.id of `cdc-relay poll --delivery
// exactly-once` on table ("schema.table"): "cdc-relay-poll-<schema>.<table>". It never equals
// a slot's (TransactionalID: slot names have no '-' or '.').
func PollTransactionalID(table string) string { return "cdc-relay-poll-" + table }

// pollKeyPrefix starts every poller's checkpoint key. Slot names have no ':' (only a-z, 0-9
// and _), so a poller's key never equals a slot's, and the two share the checkpoint topic.
const pollKeyPrefix = "poll:"

// PollKey is the checkpoint key of the poller whose producer has transactional id id:
// "poll:<id>". Keyed by the transactional id, not the table, because the id is what fences:
// after New took it, no other producer can commit a newer checkpoint under this key, which is
// what makes ReadBatch after New the last word (DESIGN.md "`poll --delivery exactly-once`").
func PollKey(transactionalID string) string { return pollKeyPrefix + transactionalID }

// Batch is a poller's checkpoint: the rows of the outbox table that its newest committed
// Kafka transaction published. It is written in that transaction, so a read_committed reader
// sees it exactly when it sees the rows' records; the poller marks the rows published only
// after the commit, and marks them again on start (a row marked already, or pruned, is
// unchanged), so a crash between the commit and the mark publishes nothing twice.
type Batch struct {
	// Seq numbers the poller's committed batches: 1 for the first, one more for each. It
	// tells the newest of two checkpoints of one key apart (the topic's partition count
	// changed) and says in the logs how far a poller got.
	Seq int64
	// Table is the outbox table ("schema.table") whose rows IDs are.
	Table string
	// IDs are the batch's rows, their id column's text, dead-lettered ones included.
	IDs []string
}

// Validate reports a checkpoint that names no rows it could mark.
func (b Batch) Validate() error {
	switch {
	case b.Seq < 1:
		return fmt.Errorf("txn: poller checkpoint: sequence %d: batches count from 1", b.Seq)
	case b.Table == "":
		return errors.New("txn: poller checkpoint: no table named")
	}
	return nil
}

// wireBatch is a poller checkpoint's JSON: the same topic and version rule as a slot's
// (wireCheckpoint), and "poll" (the transactional id) where a slot's has "slot", so that a
// Kafka tool shows which is which.
type wireBatch struct {
	Version int      `json:"version"`
	Poll    string   `json:"poll"`
	Seq     int64    `json:"seq"`
	Table   string   `json:"table"`
	IDs     []string `json:"ids"`
}

// marshalBatch encodes b as the value of key's record.
func marshalBatch(key string, b Batch) ([]byte, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	ids := b.IDs
	if ids == nil {
		ids = []string{}
	}
	return json.Marshal(wireBatch{Version: checkpointVersion, Poll: strings.TrimPrefix(key, pollKeyPrefix), Seq: b.Seq, Table: b.Table, IDs: ids})
}

// unmarshalBatch decodes a value written by marshalBatch.
func unmarshalBatch(v []byte) (Batch, error) {
	var w wireBatch
	if err := json.Unmarshal(v, &w); err != nil {
		return Batch{}, fmt.Errorf("txn: decode poller checkpoint: %w", err)
	}
	if w.Version < 1 || w.Version > checkpointVersion {
		return Batch{}, fmt.Errorf("txn: poller checkpoint of %q has version %d, this poller reads version %d: a newer poller wrote it; run that version", w.Poll, w.Version, checkpointVersion)
	}
	b := Batch{Seq: w.Seq, Table: w.Table, IDs: w.IDs}
	return b, b.Validate()
}

// CommitBatch is Commit for a poller (Config.Slot set to PollKey of the transactional id):
// it writes b, the rows the open transaction published, into it, flushes and commits, with
// Commit's errors and what each means. Mark the rows published only after it returned nil.
func (p *Producer) CommitBatch(ctx context.Context, b Batch) error {
	if err := p.usable(); err != nil {
		return err
	}
	value, err := marshalBatch(p.cfg.Slot, b)
	if err != nil {
		return err
	}
	rec := &kgo.Record{Topic: p.cfg.CheckpointTopic, Key: []byte(p.cfg.Slot), Value: value}
	return p.fatal(p.commitRecord(ctx, rec, fmt.Sprintf("of batch %d", b.Seq)))
}

// ReadBatch returns the newest committed poller checkpoint under key (PollKey) in topic, read
// as ReadCheckpoint reads a slot's, and ok false when there is none (or a tombstone). Call it
// after New, for ReadCheckpoint's reasons. Of one key in several partitions it returns the
// highest Seq.
func ReadBatch(ctx context.Context, opts []kgo.Opt, topic, key string) (b Batch, ok bool, err error) {
	latest, err := newestOf(ctx, opts, topic, key)
	if err != nil {
		return Batch{}, false, err
	}
	for _, r := range latest {
		c, err := unmarshalBatch(r.Value)
		if err != nil {
			return Batch{}, false, fmt.Errorf("txn: the checkpoint of %s at %s partition %d offset %d: %w", key, topic, r.Partition, r.Offset, err)
		}
		if !ok || c.Seq > b.Seq {
			b, ok = c, true
		}
	}
	return b, ok, nil
}
