package deadletters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/sink"
)

// Tally is what a replay or discard did.
type Tally struct {
	Replayed, Discarded, Refused, Skipped, Failed int
	Reasons                                       map[string]int // refusals by cause
}

func (t *Tally) refuse(cause string) {
	t.Refused++
	if t.Reasons == nil {
		t.Reasons = map[string]int{}
	}
	t.Reasons[cause]++
}

// String is the line printed at the end: "replayed N, refused M (causes), skipped K".
func (t Tally) String() string {
	var b strings.Builder
	if t.Discarded > 0 {
		fmt.Fprintf(&b, "discarded %d, ", t.Discarded)
	} else {
		fmt.Fprintf(&b, "replayed %d, ", t.Replayed)
	}
	fmt.Fprintf(&b, "refused %d", t.Refused)
	if len(t.Reasons) > 0 {
		keys := make([]string, 0, len(t.Reasons))
		for k := range t.Reasons {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s: %d", k, t.Reasons[k])
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, ", skipped %d", t.Skipped)
	if t.Failed > 0 {
		fmt.Fprintf(&b, ", failed %d", t.Failed)
	}
	return b.String()
}

// Refusal causes, the keys of Tally.Reasons.
const (
	CauseTopicMissing = "topic missing"
	CauseTooLarge     = "too large"
	CauseNotWritable  = "not writable"
	CauseBadRow       = "bad row"
	CauseNoTopic      = "no original topic"
	CauseUnclassified = "unclassified"
)

// Replayer sends letters back to their original topics.
type Replayer struct {
	Sink   *sink.Sink
	Store  Store
	Out    io.Writer
	DryRun bool
	Now    func() time.Time
	// ReplayUnclassified also replays letters without a class (parked by a relay older than
	// the dlq-class header); otherwise they are refused, since any of them may be a bad row.
	ReplayUnclassified bool
	// Known is every letter of the store, handled ones included (Store.Load). A pending letter
	// of an event that a letter in Known was already replayed for (the relay parked the event
	// again after a restart replayed its transaction) is marked replayed without being sent.
	Known []*Letter

	topics map[string]topicState
}

type topicState struct {
	err      error // the topic cannot take records: missing, not authorized, invalid
	cause    string
	maxBytes int64 // max.message.bytes; 0 when unknown
}

// check returns why l cannot be replayed now ("" if it can), and the refusal cause.
func (r *Replayer) check(ctx context.Context, l *Letter, rec *kgo.Record) (why, cause string) {
	if l.BadRow() {
		return fmt.Sprintf("a bad row (%s): replaying the same bytes cannot fix it; correct the row and insert it into the outbox again, then discard this letter", l.Error), CauseBadRow
	}
	if l.Unclassified() && !r.ReplayUnclassified {
		return fmt.Sprintf("parked by an older relay without a class (%s): it may be a bad row, whose record must not be published; "+
			"check it with `dead-letters show %s`, then replay it with --replay-unclassified or discard it", l.Error, l.ID), CauseUnclassified
	}
	if l.Topic == "" {
		return "the letter names no original topic", CauseNoTopic
	}
	ts := r.topic(ctx, l.Topic)
	if ts.err != nil {
		return ts.err.Error(), ts.cause
	}
	if ts.maxBytes > 0 {
		if n := l.Size(rec.Headers); n > ts.maxBytes {
			return fmt.Sprintf("the record is %d bytes and topic %s takes at most %d (max.message.bytes): raise it, e.g. "+
				"kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config max.message.bytes=%d, then replay again",
				n, l.Topic, ts.maxBytes, l.Topic, roundUp(n)), CauseTooLarge
		}
	}
	return "", ""
}

func roundUp(n int64) int64 { return (n/1024 + 1) * 1024 }

func (r *Replayer) topic(ctx context.Context, topic string) topicState {
	if ts, ok := r.topics[topic]; ok {
		return ts
	}
	if r.topics == nil {
		r.topics = map[string]topicState{}
	}
	adm := kadm.NewClient(r.Sink.Client())
	var ts topicState
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tds, err := adm.ListTopics(cctx, topic)
	if err == nil {
		td, ok := tds[topic]
		switch {
		case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			err = fmt.Errorf("topic %s does not exist: create it, then replay again", topic)
			ts.cause = CauseTopicMissing
		case errors.Is(td.Err, kerr.TopicAuthorizationFailed):
			err = fmt.Errorf("topic %s is not writable: %w (grant WRITE and DESCRIBE on it, then replay again)", topic, td.Err)
			ts.cause = CauseNotWritable
		case errors.Is(td.Err, kerr.InvalidTopicException):
			err = fmt.Errorf("topic name %q is not valid in Kafka: %w (no replay can fix it: discard the letter)", topic, td.Err)
			ts.cause = CauseTopicMissing
		case td.Err != nil:
			err = fmt.Errorf("describe topic %s: %w", topic, td.Err)
			ts.cause = CauseNotWritable
		}
	} else {
		err = fmt.Errorf("describe topic %s: %w", topic, err)
		ts.cause = CauseNotWritable
	}
	if err != nil {
		ts.err = err
		r.topics[topic] = ts
		return ts
	}
	rcs, err := adm.DescribeTopicConfigs(cctx, topic)
	if err == nil {
		if rc, e := rcs.On(topic, nil); e == nil && rc.Err == nil {
			for _, c := range rc.Configs {
				if c.Key == "max.message.bytes" && c.Value != nil {
					ts.maxBytes, _ = strconv.ParseInt(*c.Value, 10, 64)
				}
			}
		}
	}
	r.topics[topic] = ts // limit unknown (DescribeConfigs denied): the produce says
	return ts
}

type sent struct {
	l    *Letter
	dups []*Letter // letters of the same event, marked with it
	err  error
	rec  *kgo.Record
}

// Replay replays the selected letters (pending ones; the others count as skipped), in the
// order given. Letters of one event (Letter.Event: same source, outbox id, topic, cdc-lsn, key
// and value) go once and are marked together. A letter is marked replayed only after Kafka
// acknowledged it.
func (r *Replayer) Replay(ctx context.Context, letters []*Letter) (Tally, error) {
	var t Tally
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	at := now()
	var todo []*sent
	byEvent := map[eventKey]*sent{}
	replayed := map[eventKey]*Letter{}
	for _, l := range r.Known {
		if l.State == Replayed && l.OutboxID != "" {
			replayed[l.event()] = l
		}
	}
	var errs []error
	for _, l := range letters {
		if l.State != Pending {
			t.Skipped++
			fmt.Fprintf(r.Out, "skipped  %s outbox-id %s: already %s at %s\n", l.ID, l.OutboxID, l.State, l.HandledAt.UTC().Format(time.RFC3339))
			continue
		}
		k := l.event()
		if first := replayed[k]; first != nil && l.OutboxID != "" {
			t.Skipped++
			if r.DryRun {
				fmt.Fprintf(r.Out, "would skip %s outbox-id %s: the same event as letter %s, replayed already\n", l.ID, l.OutboxID, first.ID)
				continue
			}
			if _, err := r.Store.Mark(ctx, l, Replayed); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(r.Out, "skipped  %s outbox-id %s: the same event as letter %s, replayed at %s: marked replayed, not sent again\n",
				l.ID, l.OutboxID, first.ID, first.HandledAt.UTC().Format(time.RFC3339))
			continue
		}
		if s := byEvent[k]; s != nil && l.OutboxID != "" {
			s.dups = append(s.dups, l)
			continue
		}
		rec := l.Record(at)
		if why, cause := r.check(ctx, l, rec); why != "" {
			t.refuse(cause)
			fmt.Fprintf(r.Out, "refused  %s outbox-id %s -> %s: %s\n", l.ID, l.OutboxID, l.Topic, why)
			if l.OutboxID != "" {
				byEvent[k] = &sent{l: l, err: errRefused} // its duplicates are refused with it
			}
			continue
		}
		s := &sent{l: l, rec: rec}
		if l.OutboxID != "" {
			byEvent[k] = s
		}
		todo = append(todo, s)
	}
	for _, s := range byEvent {
		if s.err == errRefused {
			for _, d := range s.dups {
				t.refuse("duplicate of a refused letter")
				fmt.Fprintf(r.Out, "refused  %s outbox-id %s: the same event as letter %s, refused above\n", d.ID, d.OutboxID, s.l.ID)
			}
		}
	}
	if r.DryRun {
		for _, s := range todo {
			fmt.Fprintf(r.Out, "would replay %s outbox-id %s -> %s (key %q, %d bytes)%s\n", s.l.ID, s.l.OutboxID, s.l.Topic, s.l.Key, len(s.l.Value), dupNote(s.dups))
		}
		t.Replayed = 0
		return t, nil
	}
	var wg sync.WaitGroup
	for _, s := range todo {
		wg.Add(1)
		r.Sink.Produce(ctx, s.rec, func(rec *kgo.Record, err error) {
			s.err = err
			wg.Done()
		})
	}
	if err := r.Sink.Flush(ctx); err != nil {
		return t, fmt.Errorf("wait for Kafka to acknowledge the replayed records: %w (nothing unacknowledged was marked: run replay again)", err)
	}
	wg.Wait()
	for _, s := range todo {
		failure := sink.Failure(0)
		if s.err != nil {
			// The relay's and the poller's classification: refused means refused on its own, not
			// a batch refused as too large although this record fits (that one failed: rerun).
			failure, s.err = r.Sink.Classify(s.rec, s.err)
		}
		switch {
		case failure == sink.Refused:
			cause := CauseNotWritable
			if errors.Is(s.err, kerr.MessageTooLarge) || errors.Is(s.err, kerr.RecordListTooLarge) {
				cause = CauseTooLarge
			} else if errors.Is(s.err, kerr.UnknownTopicOrPartition) {
				cause = CauseTopicMissing
			}
			t.refuse(cause)
			fmt.Fprintf(r.Out, "refused  %s outbox-id %s -> %s: Kafka refused it: %v\n", s.l.ID, s.l.OutboxID, s.l.Topic, s.err)
			continue
		case s.err != nil:
			t.Failed++
			fmt.Fprintf(r.Out, "failed   %s outbox-id %s -> %s: %v\n", s.l.ID, s.l.OutboxID, s.l.Topic, s.err)
			continue
		}
		for i, l := range append([]*Letter{s.l}, s.dups...) {
			ok, err := r.Store.Mark(ctx, l, Replayed)
			if err != nil {
				errs = append(errs, fmt.Errorf("%w (it was sent: a rerun sends it again)", err))
				continue
			}
			if i == 0 && ok {
				t.Replayed++
			} else {
				t.Skipped++
			}
		}
		fmt.Fprintf(r.Out, "replayed %s outbox-id %s -> %s partition %d offset %d%s\n", s.l.ID, s.l.OutboxID, s.l.Topic, s.rec.Partition, s.rec.Offset, dupNote(s.dups))
	}
	return t, errors.Join(errs...)
}

var errRefused = errors.New("refused")

func dupNote(d []*Letter) string {
	if len(d) == 0 {
		return ""
	}
	ids := make([]string, len(d))
	for i, l := range d {
		ids[i] = l.ID
	}
	return " (once for letters " + strings.Join(ids, ", ") + " too: the same event)"
}

// Discard marks the selected pending letters discarded; nothing is deleted.
func Discard(ctx context.Context, st Store, out io.Writer, letters []*Letter, dryRun bool) (Tally, error) {
	var t Tally
	for _, l := range letters {
		if l.State != Pending {
			t.Skipped++
			fmt.Fprintf(out, "skipped  %s outbox-id %s: already %s\n", l.ID, l.OutboxID, l.State)
			continue
		}
		if dryRun {
			fmt.Fprintf(out, "would discard %s outbox-id %s (%s)\n", l.ID, l.OutboxID, l.Reason())
			continue
		}
		ok, err := st.Mark(ctx, l, Discarded)
		if err != nil {
			return t, err
		}
		if !ok {
			t.Skipped++
			continue
		}
		t.Discarded++
		fmt.Fprintf(out, "discarded %s outbox-id %s -> %s (%s)\n", l.ID, l.OutboxID, l.Topic, l.Reason())
	}
	return t, nil
}
