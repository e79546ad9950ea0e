package deadletters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/contract"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// Store is where letters are parked and what was done to them is kept.
type Store interface {
	// Load returns every letter with its state, oldest first.
	Load(ctx context.Context) ([]*Letter, error)
	// Mark records that l was replayed or discarded. It reports false when l was handled
	// already (by another run).
	Mark(ctx context.Context, l *Letter, s State) (bool, error)
	// Name says where the letters are, for messages.
	Name() string
}

// TopicStore reads the dead-letter topic and keeps marks in a PostgreSQL table.
type TopicStore struct {
	Topic string
	Opts  []kgo.Opt // brokers, TLS, SASL for the consumer
	Conn  *pgx.Conn
	Marks outbox.Table
	// Timeout bounds reading the topic up to its end. Default 60s.
	Timeout time.Duration
}

// Name says which store this is, for messages.
func (s *TopicStore) Name() string { return "dead-letter topic " + s.Topic }

// Prepare creates the marks table if it is missing.
func (s *TopicStore) Prepare(ctx context.Context) error {
	return CreateMarksTable(ctx, s.Conn, s.Marks.String())
}

// Load reads the topic from its start to the end it had when Load began.
func (s *TopicStore) Load(ctx context.Context) ([]*Letter, error) {
	cl, err := kgo.NewClient(s.Opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	// The topic's ID tells this topic from one of the same name deleted before it, whose
	// offsets the marks table may still hold.
	var topicID string
	tds, err := adm.ListTopics(lctx, s.Topic)
	if err == nil {
		if td, ok := tds[s.Topic]; ok && td.Err == nil && td.ID != (kadm.TopicID{}) {
			topicID = td.ID.String()
		}
	}
	starts, err := adm.ListStartOffsets(lctx, s.Topic)
	var ends kadm.ListedOffsets
	if err == nil {
		ends, err = adm.ListEndOffsets(lctx, s.Topic)
	}
	cancel()
	if err == nil {
		err = starts.Error()
		if err == nil {
			err = ends.Error()
		}
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, nil // nothing was ever parked there
	}
	if err != nil {
		return nil, fmt.Errorf("list the offsets of the dead-letter topic %s: %w", s.Topic, err)
	}
	from := map[int32]kgo.Offset{}
	want := map[int32]int64{} // partition → end offset still to reach
	starts.Each(func(o kadm.ListedOffset) {
		end, _ := ends.Lookup(s.Topic, o.Partition)
		if end.Offset > o.Offset {
			from[o.Partition] = kgo.NewOffset().At(o.Offset)
			want[o.Partition] = end.Offset
		}
	})
	marks, err := s.loadMarks(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Letter
	if len(want) > 0 {
		cons, err := kgo.NewClient(append(append([]kgo.Opt{}, s.Opts...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.Topic: from}),
			kgo.FetchMaxWait(200*time.Millisecond))...)
		if err != nil {
			return nil, err
		}
		defer cons.Close()
		timeout := s.Timeout
		if timeout == 0 {
			timeout = 60 * time.Second
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for len(want) > 0 {
			fs := cons.PollFetches(rctx)
			if rctx.Err() != nil {
				return nil, fmt.Errorf("read the dead-letter topic %s: %d partition(s) not read to their end within %s", s.Topic, len(want), timeout)
			}
			var ferr error
			fs.EachError(func(_ string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					ferr = fmt.Errorf("read the dead-letter topic %s partition %d: %w", s.Topic, p, err)
				}
			})
			if ferr != nil {
				return nil, ferr
			}
			fs.EachRecord(func(r *kgo.Record) {
				end, ok := want[r.Partition]
				if !ok || r.Offset >= end {
					return
				}
				l := &Letter{
					ID: fmt.Sprintf("%d:%d", r.Partition, r.Offset), Partition: r.Partition, Offset: r.Offset, TopicID: topicID,
					Key: r.Key, Value: r.Value, Headers: r.Headers, Seen: r.Timestamp, State: Pending,
				}
				l.fill()
				for _, m := range marks[[2]int64{int64(r.Partition), r.Offset}] {
					if m.marks(l) {
						l.State, l.HandledAt = m.state, m.at
						break
					}
				}
				out = append(out, l)
				if r.Offset+1 >= end {
					delete(want, r.Partition)
				}
			})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Seen.Equal(out[j].Seen) {
			return out[i].Seen.Before(out[j].Seen)
		}
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out, nil
}

// mark is one row of the marks table.
type mark struct {
	state      State
	at         time.Time // marked_at
	topicID    string
	letterTime *time.Time // nil: -infinity, a mark written before letter_time existed
	outboxID   string
	lsn        string // the letter's cdc-lsn; "" when it had none or the mark predates the column
}

// marks reports whether m is the mark of l (at the same partition and offset of the topic's
// name): the same topic ID, record timestamp and cdc-lsn. A mark without a topic ID (a broker
// without IDs) needs the same timestamp; one written before either was kept needs the same
// outbox id and may not be older than the letter, or a topic deleted and re-created would hand
// its marks to new letters.
func (m mark) marks(l *Letter) bool {
	if m.lsn != "" && m.lsn != l.LSN {
		return false
	}
	switch {
	case m.letterTime == nil:
		return m.topicID == "" && m.outboxID == l.OutboxID && !m.at.Before(l.Seen)
	case m.topicID != "" || l.TopicID != "":
		return m.topicID == l.TopicID && m.letterTime.Equal(l.Seen)
	}
	return m.letterTime.Equal(l.Seen)
}

func (s *TopicStore) loadMarks(ctx context.Context) (map[[2]int64][]mark, error) {
	rows, err := s.Conn.Query(ctx, `SELECT "partition", "offset", state, marked_at, topic_id,
		CASE WHEN letter_time = '-infinity' THEN NULL ELSE letter_time END, coalesce(outbox_id, ''), coalesce(lsn, '')
		FROM `+s.Marks.Sanitize()+` WHERE topic = $1`, s.Topic)
	if err != nil {
		return nil, fmt.Errorf("read the marks table %s: %w", s.Marks, err)
	}
	defer rows.Close()
	ms := map[[2]int64][]mark{}
	for rows.Next() {
		var p int32
		var off int64
		var st string
		var m mark
		if err := rows.Scan(&p, &off, &st, &m.at, &m.topicID, &m.letterTime, &m.outboxID, &m.lsn); err != nil {
			return nil, err
		}
		m.state = State(st)
		k := [2]int64{int64(p), off}
		ms[k] = append(ms[k], m)
	}
	return ms, rows.Err()
}

// Mark records st for l in the marks table; it reports false when l was marked already.
func (s *TopicStore) Mark(ctx context.Context, l *Letter, st State) (bool, error) {
	tag, err := s.Conn.Exec(ctx, `INSERT INTO `+s.Marks.Sanitize()+` (topic, topic_id, "partition", "offset", letter_time, outbox_id, lsn, state)
		VALUES ($1, $2, $3, $4, $5, $6, nullif($7, ''), $8) ON CONFLICT DO NOTHING`,
		s.Topic, l.TopicID, l.Partition, l.Offset, l.Seen, l.OutboxID, l.LSN, string(st))
	if err != nil {
		return false, fmt.Errorf("mark letter %s %s in %s: %w", l.ID, st, s.Marks, err)
	}
	return tag.RowsAffected() == 1, nil
}

// TableStore reads the PostgreSQL dead-letter table, whose replayed_at and discarded_at
// columns keep what was done (MigrateTable adds them).
type TableStore struct {
	Conn  *pgx.Conn
	Table outbox.Table
	Slot  string // only this slot's rows when set
}

// Name says which store this is, for messages.
func (s *TableStore) Name() string { return "dead-letter table " + s.Table.String() }

// Prepare adds the state columns if they are missing; it reports whether the table exists.
func (s *TableStore) Prepare(ctx context.Context) (bool, error) {
	return MigrateTable(ctx, s.Conn, s.Table.String())
}

// Load reads every letter of the table.
func (s *TableStore) Load(ctx context.Context) ([]*Letter, error) {
	rows, err := s.Conn.Query(ctx, `SELECT id, slot, coalesce(outbox_id, ''), coalesce(topic, ''), key, value,
		coalesce(headers::text, '{}'), error, coalesce(class, headers->>'dlq-class', ''), coalesce(lsn::text, ''), created_at, replayed_at, discarded_at
		FROM `+s.Table.Sanitize()+` WHERE ($1 = '' OR slot = $1) ORDER BY created_at, id`, s.Slot)
	if err != nil {
		return nil, fmt.Errorf("read the dead-letter table %s: %w", s.Table, err)
	}
	defer rows.Close()
	var out []*Letter
	for rows.Next() {
		var (
			id           int64
			hj           string
			replayed, dd *time.Time
		)
		l := &Letter{State: Pending}
		if err := rows.Scan(&id, &l.Slot, &l.OutboxID, &l.Topic, &l.Key, &l.Value, &hj, &l.Error, &l.Class, &l.LSN, &l.Seen, &replayed, &dd); err != nil {
			return nil, fmt.Errorf("read the dead-letter table %s: %w", s.Table, err)
		}
		l.ID = strconv.FormatInt(id, 10)
		var hm map[string]string
		if err := json.Unmarshal([]byte(hj), &hm); err != nil {
			return nil, fmt.Errorf("dead-letter table %s row %d: headers: %w", s.Table, id, err)
		}
		l.Headers = orderHeaders(hm)
		l.fill()
		switch {
		case replayed != nil:
			l.State, l.HandledAt = Replayed, *replayed
		case dd != nil:
			l.State, l.HandledAt = Discarded, *dd
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// orderHeaders rebuilds a header list from the table's jsonb object, which keeps no order:
// the contract's leading headers in the relay's order, the row's own sorted, then the position
// headers, then dlq-*.
func orderHeaders(m map[string]string) []kgo.RecordHeader {
	rank := func(k string) int {
		switch k {
		case contract.OutboxID:
			return 0
		case contract.OutboxTable:
			return 1
		case contract.AggregateID:
			return 2
		case contract.EventType:
			return 3
		case contract.LSN:
			return 5
		case contract.CommitTime:
			return 6
		}
		if strings.HasPrefix(k, contract.DLQPrefix) {
			return 7
		}
		return 4
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if ri, rj := rank(keys[i]), rank(keys[j]); ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	h := make([]kgo.RecordHeader, 0, len(keys))
	for _, k := range keys {
		h = append(h, kgo.RecordHeader{Key: k, Value: []byte(m[k])})
	}
	return h
}

// Mark records st for l in its row; it reports false when l was marked already.
func (s *TableStore) Mark(ctx context.Context, l *Letter, st State) (bool, error) {
	col := "replayed_at"
	if st == Discarded {
		col = "discarded_at"
	}
	tag, err := s.Conn.Exec(ctx, `UPDATE `+s.Table.Sanitize()+` SET `+col+` = now()
		WHERE id = $1 AND replayed_at IS NULL AND discarded_at IS NULL`, l.ID)
	if err != nil {
		return false, fmt.Errorf("mark letter %s %s in %s: %w", l.ID, st, s.Table, err)
	}
	return tag.RowsAffected() == 1, nil
}
