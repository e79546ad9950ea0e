package kafkatxn

import (
	"bytes"
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/record"
)

// Holds reports whether the open transaction already holds rec, a record whose produce
// failed: whether rec's partition has, between its last stable offset and its high watermark,
// a record written by this producer at its current epoch with rec's key, value and the headers
// named in match (compared by value). It is for a produce that failed for good after a retry:
// a broker may append a batch and answer REQUEST_TIMED_OUT, franz-go retries it with the same
// sequence, and a refusal of the retry leaves the first append in the transaction, which the
// commit makes visible (DESIGN.md E8). The open transaction's records all lie at or past the
// last stable offset; a record of this producer id and epoch there is of this transaction.
// The read is read_uncommitted, with a client made from opts (the seeds, TLS and SASL of the
// producer's) and closed here; rec.Partition must be the one franz-go chose (a record that
// never reached a partition was never sent, and is not found).
func (p *Producer) Holds(ctx context.Context, opts []kgo.Opt, rec *kgo.Record, match ...string) (bool, error) {
	pid, epoch, err := p.cl.ProducerID(ctx)
	if err != nil {
		return false, fmt.Errorf("txn: the producer id: %w", err)
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords())...) // a marker may be the last record before the end
	if err != nil {
		return false, fmt.Errorf("txn: configure a read_uncommitted reader: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	stable, err := adm.ListCommittedOffsets(ctx, rec.Topic)
	if err != nil {
		return false, fmt.Errorf("txn: list %s's last stable offsets: %w", rec.Topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, rec.Topic)
	if err != nil {
		return false, fmt.Errorf("txn: list %s's end offsets: %w", rec.Topic, err)
	}
	from, ok := stable.Lookup(rec.Topic, rec.Partition)
	to, ok2 := ends.Lookup(rec.Topic, rec.Partition)
	switch {
	case !ok || !ok2:
		return false, fmt.Errorf("txn: %s has no partition %d", rec.Topic, rec.Partition)
	case from.Err != nil:
		return false, fmt.Errorf("txn: list %s partition %d: %w", rec.Topic, rec.Partition, from.Err)
	case to.Err != nil:
		return false, fmt.Errorf("txn: list %s partition %d: %w", rec.Topic, rec.Partition, to.Err)
	case from.Offset >= to.Offset:
		return false, nil // no open transaction in the partition
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{rec.Topic: {rec.Partition: kgo.NewOffset().At(from.Offset)}})
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("txn: read %s partition %d from %d to %d: %w", rec.Topic, rec.Partition, from.Offset, to.Offset, err)
		}
		var fetchErr error
		fs.EachError(func(t string, part int32, err error) {
			fetchErr = fmt.Errorf("txn: read %s partition %d: %w", t, part, err)
		})
		if fetchErr != nil {
			return false, fetchErr
		}
		found, done := false, false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= to.Offset {
				done = true
				return
			}
			if r.Offset+1 >= to.Offset {
				done = true
			}
			if !r.Attrs.IsControl() && r.ProducerID == pid && r.ProducerEpoch == epoch && sameRecord(r, rec, match) {
				found = true
			}
		})
		if found || done {
			return found, nil
		}
	}
}

// sameRecord reports whether a (read back) is b (produced): the same key, value and values of
// the headers named in match.
func sameRecord(a, b *kgo.Record, match []string) bool {
	if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) {
		return false
	}
	for _, name := range match {
		if !bytes.Equal(record.Header(a, name), record.Header(b, name)) {
			return false
		}
	}
	return true
}
