package kafkatxn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicMissingError says the checkpoint topic does not exist.
type TopicMissingError struct{ Topic string }

func (e *TopicMissingError) Error() string {
	return fmt.Sprintf("txn: the checkpoint topic %s does not exist: create it compacted (cleanup.policy=compact), or let the relay create it", e.Topic)
}

// NotCompactedError says the checkpoint topic deletes by retention: a relay stopped longer
// than retention.ms would lose its checkpoint and replay, as duplicates, what it had committed.
type NotCompactedError struct {
	Topic  string
	Policy string
}

func (e *NotCompactedError) Error() string {
	return fmt.Sprintf("txn: the checkpoint topic %s has cleanup.policy=%s: retention would delete checkpoints; set cleanup.policy=compact (kafka-configs --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact)", e.Topic, e.Policy, e.Topic)
}

// CheckpointTopicConfigs are the topic configs EnsureCheckpointTopic creates the topic with:
// compacted, and rolled often enough that the cleaner keeps the tail a start reads short
// (a checkpoint per Kafka transaction, ten a second, is 36,000 records an hour per slot).
var CheckpointTopicConfigs = map[string]string{
	"cleanup.policy":            "compact",
	"segment.ms":                "3600000",
	"min.cleanable.dirty.ratio": "0.1",
}

// EnsureCheckpointTopic creates topic (one partition, replication factor replicas, -1 for
// the broker's default) if it does not exist, and checks that an existing one is compacted.
// It returns once the topic's partition can be listed: a topic created a moment ago is known
// to the controller before every broker knows it.
func EnsureCheckpointTopic(ctx context.Context, cl *kgo.Client, topic string, replicas int16) error {
	adm := kadm.NewClient(cl)
	configs := map[string]*string{}
	for k, v := range CheckpointTopicConfigs {
		configs[k] = &v
	}
	_, err := adm.CreateTopic(ctx, 1, replicas, configs, topic)
	switch {
	case err == nil:
	case errors.Is(err, kerr.TopicAlreadyExists):
		if err := checkCompacted(ctx, adm, topic); err != nil {
			return err
		}
	default:
		return fmt.Errorf("txn: create the checkpoint topic %s: %w", topic, err)
	}
	err = whileUnknown(ctx, func() error {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("txn: list the checkpoint topic %s: %w", topic, err)
	}
	return nil
}

// checkCompacted fails with a *NotCompactedError unless topic's cleanup.policy is compact.
func checkCompacted(ctx context.Context, adm *kadm.Client, topic string) error {
	var rc kadm.ResourceConfig
	err := whileUnknown(ctx, func() error {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err == nil {
			rc, err = rcs.On(topic, nil)
		}
		if err == nil {
			err = rc.Err
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("txn: describe the checkpoint topic %s: %w", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			policy := c.MaybeValue()
			if !strings.Contains(policy, "compact") || strings.Contains(policy, "delete") {
				return &NotCompactedError{Topic: topic, Policy: policy}
			}
		}
	}
	return nil
}

// whileUnknown calls fn again, every 100 ms, while it fails because the broker does not know
// the topic yet (just created, by this relay, another one or a test).
func whileUnknown(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ReadCheckpoint returns the newest committed checkpoint of slot in topic, read with
// read_committed: what the newest committed Kafka transaction of the slot's producer wrote
// (ok false when none did, or the newest is a tombstone). opts configure the reading client
// (seed brokers, TLS, SASL); it is made and closed here.
//
// It reads every partition to its high watermark as listed when the read begins, waiting for
// the transactions open below it to end: another slot's open transaction in the same topic
// holds the last stable offset below this slot's newest checkpoint (written after that
// transaction began), and a read that stopped at the last stable offset would return an
// older checkpoint (DESIGN.md, "A checkpoint read ends"). Such a wait is bounded by the other
// producer's transaction timeout, and is usually one commit's round trip.
//
// Call it after New: New fenced every earlier producer of the slot and aborted its open
// transaction, so no earlier producer can commit a newer checkpoint after this read, and this
// slot's own records hold nothing open. A slot's key found in more than one partition (the
// partition count changed) gives the highest position.
func ReadCheckpoint(ctx context.Context, opts []kgo.Opt, topic, slot string) (cp Checkpoint, ok bool, err error) {
	latest, err := newestOf(ctx, opts, topic, slot)
	if err != nil {
		return Checkpoint{}, false, err
	}
	for _, r := range latest {
		var c Checkpoint
		if err := c.UnmarshalBinary(r.Value); err != nil {
			return Checkpoint{}, false, fmt.Errorf("txn: the checkpoint of slot %s at %s partition %d offset %d: %w", slot, topic, r.Partition, r.Offset, err)
		}
		if !ok || c.Position > cp.Position || (c.Position == cp.Position && c.Split.Records > cp.Split.Records) {
			cp, ok = c, true
		}
	}
	return cp, ok, nil
}

// newestOf reads topic as ReadCheckpoint does and returns, by partition, the newest committed
// record of key, unless that is a tombstone (the key's checkpoint was removed).
func newestOf(ctx context.Context, opts []kgo.Opt, topic, key string) (map[int32]*kgo.Record, error) {
	latest := map[int32]*kgo.Record{}
	err := readCommitted(ctx, opts, topic, toHighWatermark, func(r *kgo.Record) {
		switch {
		case string(r.Key) != key:
		case r.Value == nil:
			delete(latest, r.Partition)
		default:
			latest[r.Partition] = r
		}
	})
	return latest, err
}

// How far readCommitted reads.
const (
	// toStableOffset reads what a read_committed consumer sees now: up to the last stable
	// offset as listed when the read begins.
	toStableOffset = false
	// toHighWatermark reads up to the high watermark as listed when the read begins, waiting
	// for the transactions open below it to commit or abort.
	toHighWatermark = true
)

// ReadCommitted calls each, in offset order per partition, for every record of topic that a
// read_committed consumer sees, from each partition's start to its high watermark as listed
// when the read begins, waiting for the transactions open below it to end (records written
// after the listing may or may not be seen). It is what a checker of exactly-once delivery
// reads: nothing of an aborted transaction, everything of a committed one. A client is made
// from opts and closed here.
func ReadCommitted(ctx context.Context, opts []kgo.Opt, topic string, each func(*kgo.Record)) error {
	return readCommitted(ctx, opts, topic, toHighWatermark, each)
}

// readCommitted is ReadCommitted, to the last stable offset instead when highWatermark is
// toStableOffset: what a read_committed consumer sees now, without waiting.
func readCommitted(ctx context.Context, opts []kgo.Opt, topic string, highWatermark bool, each func(*kgo.Record)) error {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records (commit and abort markers) are returned too, so that a read ends
		// at the last stable offset when a marker is the last thing before it, as it is
		// after every transaction.
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("txn: configure a read_committed reader: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	list := adm.ListCommittedOffsets // the last stable offsets
	if highWatermark {
		list = adm.ListEndOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil {
		return fmt.Errorf("txn: list %s's end offsets: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("txn: list %s's start offsets: %w", topic, err)
	}
	want := map[int32]int64{} // partition: the offset the read must reach
	var listErr error
	ends.Each(func(o kadm.ListedOffset) {
		switch {
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition):
			listErr = &TopicMissingError{Topic: topic}
		case o.Err != nil:
			listErr = fmt.Errorf("txn: list %s partition %d: %w", topic, o.Partition, o.Err)
		default:
			if s, found := starts.Lookup(topic, o.Partition); !found || s.Offset < o.Offset {
				want[o.Partition] = o.Offset
			}
		}
	})
	if listErr != nil || len(want) == 0 {
		return listErr
	}
	from := map[int32]kgo.Offset{}
	for p := range want {
		from[p] = kgo.NewOffset().AtStart()
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: from})
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("txn: read %s: %d partitions not read to their end (a transaction open in them has not ended): %w", topic, len(want), err)
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			fetchErr = fmt.Errorf("txn: read %s partition %d: %w", t, p, err)
		})
		if fetchErr != nil {
			return fetchErr
		}
		// The end is reached when the record just before it is seen: a committed record, or a
		// marker (kept for this: after a transaction the last record is its marker), or when a
		// later one is (aborted records are dropped, and their marker may come after the end).
		fs.EachRecord(func(r *kgo.Record) {
			end, reading := want[r.Partition]
			if !reading || r.Offset >= end {
				delete(want, r.Partition) // past the listed offset: written after the read began
				return
			}
			if !r.Attrs.IsControl() {
				each(r)
			}
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return nil
}
