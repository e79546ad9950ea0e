package testenv

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const hint = `run: eval "$(scripts/dev-up.sh)" (or make test, which does it)`

// PGURL returns CDC_RELAY_PG_URL; without it the test stops (Require).
func PGURL(t testing.TB) string {
	t.Helper()
	Require(t, "PostgreSQL", "CDC_RELAY_PG_URL")
	return os.Getenv("CDC_RELAY_PG_URL")
}

// PGConfig parses CDC_RELAY_PG_URL (PGURL).
func PGConfig(t testing.TB) *pgx.ConnConfig {
	t.Helper()
	cc, err := pgx.ParseConfig(PGURL(t))
	if err != nil {
		t.Fatalf("CDC_RELAY_PG_URL: %v", err)
	}
	return cc
}

// Brokers returns CDC_RELAY_BROKERS; without it the test stops (Require).
func Brokers(t testing.TB) []string {
	t.Helper()
	Require(t, "Kafka", "CDC_RELAY_BROKERS")
	return strings.Split(os.Getenv("CDC_RELAY_BROKERS"), ",")
}

var nonName = regexp.MustCompile(`[^a-z0-9_]+`)

// Name derives a short unique identifier from the test's name, valid as a slot,
// publication, table and topic name.
func Name(t testing.TB) string {
	n := strings.ToLower(t.Name())
	h := fnv.New32a()
	h.Write([]byte(n + time.Now().String()))
	n = strings.Trim(nonName.ReplaceAllString(n, "_"), "_")
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	return fmt.Sprintf("t_%s_%08x", strings.Trim(n, "_"), h.Sum32())
}

// Pool opens a pool to the test database, closed at cleanup.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, PGURL(t))
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("PostgreSQL at CDC_RELAY_PG_URL is not reachable: %v; %s", err, hint)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Kafka returns a client for admin requests and consuming, closed at cleanup.
func Kafka(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(Brokers(t)...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("Kafka at CDC_RELAY_BROKERS is not reachable: %v; %s", err, hint)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Fixture is one test's private outbox: table, publication, slot and topic names.
type Fixture struct {
	Name        string // base name
	Table       string // public.<name>
	Publication string
	Slot        string
	Topic       string
	DLQ         string
	Pool        *pgxpool.Pool
}

// OutboxDDL is the contract table with the optional columns, under a name.
func OutboxDDL(table string) string {
	return `CREATE TABLE ` + table + ` (
    id            BIGSERIAL    PRIMARY KEY,
    aggregate_id  TEXT,
    topic         TEXT,
    payload       JSONB,
    event_type    TEXT,
    headers       JSONB,
    created_at    TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    published_at  TIMESTAMPTZ  NULL
)`
}

// NewFixture creates the outbox table and the topics (3 partitions); the slot and
// publication are left to the test (usually `cdc-relay slot create`), and all of it is
// dropped at cleanup. The table's constraints are loose on purpose so tests can write bad rows.
func NewFixture(t testing.TB) *Fixture {
	t.Helper()
	f := newFixture(t, Pool(t))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.DropReplication(ctx)
		_, _ = f.Pool.Exec(ctx, `DROP TABLE IF EXISTS `+f.Table)
	})
	return f
}

// newFixture creates the test's outbox table in pool's database and its topics (3 partitions,
// the dead-letter topic 1, deleted at cleanup).
func newFixture(t testing.TB, pool *pgxpool.Pool) *Fixture {
	t.Helper()
	n := Name(t)
	f := &Fixture{Name: n, Table: "public." + n, Publication: n, Slot: n, Topic: n + ".events", DLQ: n + ".dlq", Pool: pool}
	if _, err := pool.Exec(context.Background(), OutboxDDL(f.Table)); err != nil {
		t.Fatalf("create %s: %v", f.Table, err)
	}
	CreateTopic(t, f.Topic, 3)
	CreateTopic(t, f.DLQ, 1)
	return f
}

// SlotEnv is the environment that names the fixture's slot and publication to cdc-relay.
func (f *Fixture) SlotEnv() []string {
	return []string{"CDC_RELAY_SLOT=" + f.Slot, "CDC_RELAY_PUBLICATION=" + f.Publication}
}

// DropReplication drops the fixture's slot and publication, for a cleanup before it drops the
// table. The slot may still be held for a moment by a walsender that is exiting: it tries
// again until ctx ends.
func (f *Fixture) DropReplication(ctx context.Context) {
	for {
		_, err := f.Pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, f.Slot)
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = f.Pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{f.Publication}.Sanitize())
}

// CreateTopic creates a topic (deleted at cleanup).
func CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	CreateTopicWithConfig(t, topic, partitions, nil)
}

// CreateTopicWithConfig creates a topic with topic-level configuration (e.g. max.message.bytes),
// deleted at cleanup. It returns once the broker's metadata has the topic with a leader for every
// partition: the controller answers the creation before the brokers know of it, and a relay
// started in between found its dead-letter topic missing (exit 2).
func CreateTopicWithConfig(t testing.TB, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	adm := kadm.NewClient(Kafka(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	if _, err := adm.CreateTopic(ctx, partitions, 1, cfg, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
	})
	Eventually(t, 30*time.Second, "topic "+topic+" in the broker's metadata", func() bool {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil || td.Error() != nil {
			return false
		}
		d, ok := td[topic]
		if !ok || d.Err != nil || len(d.Partitions) != int(partitions) {
			return false
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	})
}

// SetTopicConfig sets one topic-level configuration (e.g. max.message.bytes) of topic. The broker
// may take a moment to show the new value in DescribeConfigs.
func SetTopicConfig(t testing.TB, topic, name, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(Kafka(t)).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &value}}, topic); err != nil {
		t.Fatalf("set %s=%s on topic %s: %v", name, value, topic, err)
	}
}

// LimitedTopic creates the test's topic f.Name + "." + suffix (one partition, deleted at
// cleanup) that refuses records over maxBytes (its max.message.bytes) and returns its name.
func (f *Fixture) LimitedTopic(t testing.TB, suffix, maxBytes string) string {
	t.Helper()
	topic := f.Name + "." + suffix
	CreateTopicWithConfig(t, topic, 1, map[string]string{"max.message.bytes": maxBytes})
	return topic
}

// SlotConfirmed returns the slot's confirmed_flush_lsn.
func (f *Fixture) SlotConfirmed(t testing.TB) pglogrepl.LSN {
	t.Helper()
	var s string
	err := f.Pool.QueryRow(context.Background(), `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, f.Slot).Scan(&s)
	if err != nil {
		t.Fatalf("read slot %s: %v", f.Slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// SlotReleased waits until no walsender holds the fixture's slot any more, so that whatever the
// last one was sent (a final standby status) has been applied or never will be.
func (f *Fixture) SlotReleased(t testing.TB, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "the walsender to release slot "+f.Slot, func() bool {
		var active bool
		err := f.Pool.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, f.Slot).Scan(&active)
		return err == nil && !active
	})
}

// CurrentWAL returns pg_current_wal_insert_lsn(): the end of everything committed so far. Not
// pg_current_wal_lsn(), the position written out: with synchronous_commit off (the backlog
// helpers' inserts) the last commits may still sit in the WAL buffers, past it, so a test that
// waited for the slot to pass "the end" could stop the relay before it had streamed them and
// report them lost (TestCleanStopMidBacklogLeavesTheSlotAtTheLoggedPosition did, once, under a
// load average of about 20: 1,036 of 30,000 rows past the position it waited for).
func (f *Fixture) CurrentWAL(t testing.TB) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := f.Pool.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, _ := pglogrepl.ParseLSN(s)
	return lsn
}

// Begin starts a transaction on the fixture's pool; an error ends the test. The caller commits
// or rolls it back.
func (f *Fixture) Begin(t testing.TB) pgx.Tx {
	t.Helper()
	tx, err := f.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// InsertValues runs INSERT INTO table (cols) VALUES (vals) RETURNING id with args and returns
// the id: for rows Insert cannot write (bad values, other tables, other columns).
func (f *Fixture) InsertValues(t testing.TB, table, cols, vals string, args ...any) int64 {
	t.Helper()
	var id int64
	if err := f.Pool.QueryRow(context.Background(), `INSERT INTO `+table+` (`+cols+`) VALUES (`+vals+`) RETURNING id`, args...).Scan(&id); err != nil {
		t.Fatalf("insert into %s: %v", table, err)
	}
	return id
}

// Row is one outbox row to insert.
type Row struct {
	Key       string
	Topic     string // "" means the fixture's topic
	Payload   string // JSON
	EventType string
	Headers   string // JSON object or ""
}

// Insert writes rows in one transaction (rolled back when rollback is set) and returns
// their ids in insert order.
func (f *Fixture) Insert(t testing.TB, rollback bool, rows ...Row) []int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := f.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		topic := r.Topic
		if topic == "" {
			topic = f.Topic
		}
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload, event_type, headers)
			VALUES ($1, $2, $3::jsonb, nullif($4, ''), nullif($5, '')::jsonb) RETURNING id`,
			r.Key, topic, r.Payload, r.EventType, r.Headers).Scan(&id)
		if err != nil {
			t.Fatalf("insert into %s: %v", f.Table, err)
		}
		ids = append(ids, id)
	}
	if !rollback {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// Consumer reads a topic from the beginning in the background.
type Consumer struct {
	mu      sync.Mutex
	records []*kgo.Record
	changed chan struct{}
}

// Consume starts reading topic from its start; it stops at cleanup. opts are added to the
// client's (kgo.FetchIsolationLevel(kgo.ReadCommitted()) for a read_committed consumer).
func Consume(t testing.TB, topic string, opts ...kgo.Opt) *Consumer {
	t.Helper()
	cl := Kafka(t, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50 * time.Millisecond)}, opts...)...)
	c := &Consumer{changed: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			var batch []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { batch = append(batch, r) })
			if len(batch) > 0 {
				c.mu.Lock()
				c.records = append(c.records, batch...)
				c.mu.Unlock()
				select {
				case c.changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	return c
}

// Records returns a copy of what has been read so far, in arrival order.
func (c *Consumer) Records() []*kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*kgo.Record(nil), c.records...)
}

// WaitFor waits until cond holds for the records read so far, or fails after timeout.
func (c *Consumer) WaitFor(t testing.TB, timeout time.Duration, what string, cond func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		recs := c.Records()
		if cond(recs) {
			return recs
		}
		select {
		case <-c.changed:
		case <-time.After(200 * time.Millisecond):
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s (have %d records)", timeout, what, len(recs))
		}
	}
}

// Eventually polls cond every 100ms until it holds or fails the test after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Header returns the value of header key in r as a string.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// EndOffset returns the number of records Kafka holds for topic (the sum of its partitions'
// high watermarks; the test topics are never compacted or truncated).
func EndOffset(t testing.TB, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(Kafka(t)).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// RefuseDeadLetters makes the dead-letter table (public.cdc_relay_dead_letters, which other
// tests share) refuse this fixture's slot's letters only, with a CHECK constraint, until the
// returned func drops it (at cleanup at the latest, which also deletes the slot's letters).
func (f *Fixture) RefuseDeadLetters(t testing.TB) (accept func()) {
	t.Helper()
	check := pgx.Identifier{f.Name + "_refuse"}.Sanitize()
	if _, err := f.Pool.Exec(context.Background(), `ALTER TABLE cdc_relay_dead_letters ADD CONSTRAINT `+check+
		` CHECK (slot <> '`+f.Slot+`') NOT VALID`); err != nil {
		t.Fatal(err)
	}
	accept = func() {
		if _, err := f.Pool.Exec(context.Background(), `ALTER TABLE cdc_relay_dead_letters DROP CONSTRAINT IF EXISTS `+check); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() {
		accept()
		_, _ = f.Pool.Exec(context.Background(), `DELETE FROM cdc_relay_dead_letters WHERE slot = $1`, f.Slot)
	})
	return accept
}
