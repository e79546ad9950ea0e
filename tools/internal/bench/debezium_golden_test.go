package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// debeziumTable is Debezium's default outbox table (its outbox documentation's DDL).
const debeziumTable = `CREATE TABLE %s (
    id            uuid          NOT NULL PRIMARY KEY,
    aggregatetype varchar(255)  NOT NULL,
    aggregateid   varchar(255)  NOT NULL,
    type          varchar(255)  NOT NULL,
    payload       jsonb
)`

// The relay's headers that Debezium's EventRouter does not write (docs/debezium.md, "What
// differs"): the record contract's own, kept by the profile.
var relayOnlyHeaders = []string{"aggregate-id", "cdc-commit-time", "cdc-lsn", "event-type", "outbox-id", "outbox-table"}

// The headers Debezium 3's connector (not EventRouter) adds to every record it writes, with
// extended.headers.enabled at its default (true): the writing connector's logical name (its
// topic.prefix), its type, task and run id. They describe the Debezium process, not the event,
// so the relay does not forge them (docs/debezium.md, "What differs"); the test checks that
// Debezium still writes exactly these, so that the page stays true.
var debeziumContextHeaders = []string{"__debezium.context.connectorLogicalName", "__debezium.context.connectorName",
	"__debezium.context.runId", "__debezium.context.taskId"}

// debeziumSide is a Kafka Connect worker running Debezium's PostgreSQL connector with the
// Outbox Event Router at its defaults on one table.
type debeziumSide struct {
	w    *connectWorker
	slot string
}

// startDebezium starts a Connect worker (String converters for key and value, Connect's
// defaults otherwise) and a connector on table through publication pub, with EventRouter at
// its defaults, and waits until its slot streams. Both are stopped, and the slot dropped, at
// cleanup.
func startDebezium(t *testing.T, ctx context.Context, pool *pgxpool.Pool, name, table, pub string, extra ...string) *debeziumSide {
	t.Helper()
	home, err := debeziumJars(ctx, testWriter{t})
	if err != nil {
		t.Fatalf("Debezium jars: %v (the golden test needs java and mvn)", err)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatal("java not found: the golden test runs Debezium (Kafka Connect) and needs Java 17")
	}
	dir := t.TempDir()
	cfg := Config{Brokers: testenv.Brokers(t), DebeziumHome: home}
	w := &connectWorker{pub: Publisher{Name: "debezium-" + name, Debezium: true, Args: extra}, props: filepath.Join(dir, "worker.properties"),
		offsets: filepath.Join(dir, "offsets.dat"), conns: map[string]map[string]string{}, http: &http.Client{Timeout: 30 * time.Second},
		progress: func(f string, a ...any) { t.Logf(f, a...) }}
	if err := w.start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	d := &debeziumSide{w: w, slot: name + "_dbz"}
	t.Cleanup(func() {
		w.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			if _, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, d.slot); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	conn, err := debeziumConnector(testenv.PGURL(t), map[string]string{
		"topic.prefix":     name,
		"slot.name":        d.slot,
		"publication.name": pub,
		// The publication exists (the relay's slot create made it, or the test did).
		"publication.autocreate.mode": "disabled",
		"table.include.list":          table,
	}, extra)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.add(ctx, "outbox-"+name, conn); err != nil {
		t.Fatal(err)
	}
	// Debezium's slot is active while it is created, before the (empty) snapshot whose WAL
	// position its streaming starts from; waitStreaming waits for its first record.
	err = waitUntil(ctx, 3*time.Minute, w.p, "Debezium's slot "+d.slot+" to stream", func() (bool, error) {
		if err := w.failedTask(ctx, "outbox-"+name); err != nil {
			return false, err
		}
		var active bool
		err := pool.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, d.slot).Scan(&active)
		return err == nil && active, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitStreaming writes a row of aggregate type warm (topic outbox.event.<warm>, created here)
// every second until Debezium has published one: from then on it sees every row that commits.
func waitStreaming(t *testing.T, ctx context.Context, pool *pgxpool.Pool, table, warm string, running ...*proc) {
	t.Helper()
	topic := "outbox.event." + warm
	testenv.CreateTopic(t, topic, 1)
	cl := testenv.Kafka(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), $1, 'warm', 'Warm', '{}')`, warm); err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		seen := false
		fs.EachRecord(func(r *kgo.Record) { seen = seen || testenv.Header(r, "outbox-id") == "" })
		if seen {
			return
		}
		for _, p := range running {
			if err := p.failed(); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("Debezium published no warm-up row within 3 minutes")
		}
	}
}

// relaySlot builds the relay and creates its slot (and the publication, when missing) with
// `cdc-relay slot create`; the slot and publication are dropped at cleanup. It returns the
// binary and the slot's name.
func relaySlot(t *testing.T, ctx context.Context, pool *pgxpool.Pool, name, table, pub string) (bin, slot string) {
	t.Helper()
	bin, err := BuildRelay(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin, createRelaySlot(t, ctx, pool, bin, name, table, pub)
}

// createRelaySlot is relaySlot with a built binary.
func createRelaySlot(t *testing.T, ctx context.Context, pool *pgxpool.Pool, bin, name, table, pub string) string {
	t.Helper()
	slot := name + "_relay"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			if _, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{pub}.Sanitize())
	})
	if out, err := exec.CommandContext(ctx, bin, "slot", "create", "--pg-url", testenv.PGURL(t), "--slot", slot, "--publication", pub, "--table", table).CombinedOutput(); err != nil {
		t.Fatalf("cdc-relay slot create: %v\n%s", err, out)
	}
	return slot
}

// debeziumTopics creates the topics EventRouter routes types' rows to at its defaults
// (outbox.event.<type>, 3 partitions each) and the relay's dead-letter topic, name.dlq.
func debeziumTopics(t *testing.T, name string, types []string) (topics []string, dlq string) {
	t.Helper()
	for _, ty := range types {
		topics = append(topics, "outbox.event."+ty)
		testenv.CreateTopic(t, "outbox.event."+ty, 3)
	}
	dlq = name + ".dlq"
	testenv.CreateTopic(t, dlq, 1)
	return topics, dlq
}

// startRelayRun runs `cdc-relay run --profile debezium` on slot and waits until it streams;
// it is stopped (and must exit 0) at cleanup.
func startRelayRun(t *testing.T, ctx context.Context, pool *pgxpool.Pool, bin, slot, pub, dlq string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"run", "--pg-url", testenv.PGURL(t), "--brokers", strings.Join(testenv.Brokers(t), ","), "--slot", slot, "--publication", pub,
		"--dlq-topic", dlq, "--profile", "debezium"}, extra...)
	p, err := startProc("cdc-relay", filepath.Join(t.TempDir(), "relay.log"), nil, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.stop(30 * time.Second); err != nil {
			t.Errorf("relay: %v", err)
		}
	})
	err = waitUntil(ctx, time.Minute, p, "the relay's slot "+slot+" to stream", func() (bool, error) {
		var active bool
		err := pool.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
		return err == nil && active, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// goldenRow is one row the golden test writes.
type goldenRow struct {
	aggType, aggID, typ string
	payload             *string // nil: NULL
}

// goldenRows makes n rows over the aggregate types: unicode aggregate ids, every 50th payload
// NULL, every 400th ~100 KB.
func goldenRows(n int, types []string) []goldenRow {
	keys := []string{"客户-%d", "ünïcødé-%d", "🚀-%d", "plain-%d", "Ωμέγα-%d"}
	rows := make([]goldenRow, n)
	for i := range rows {
		r := goldenRow{aggType: types[i%len(types)], aggID: fmt.Sprintf(keys[i%len(keys)], i%37), typ: []string{"Created", "Updated", "Ünïcode"}[i%3]}
		switch {
		case i%50 == 7:
		case i%400 == 13:
			p := fmt.Sprintf(`{"n": %d, "blob": "%s", "tail": ["é", 1.50, null, true]}`, i, strings.Repeat("0123456789abcdé", 100_000/16))
			r.payload = &p
		default:
			p := fmt.Sprintf(`{"n": %d, "s": "héllo \u00e9 \"q\"", "f": 1.10, "nested": {"b": [1, 2], "a": {}}}`, i)
			r.payload = &p
		}
		rows[i] = r
	}
	return rows
}

// insertGolden writes rows in transactions of batch rows, each id a fresh uuid.
func insertGolden(t *testing.T, ctx context.Context, pool *pgxpool.Pool, table string, rows []goldenRow, batch int) {
	t.Helper()
	for start := 0; start < len(rows); start += batch {
		part := rows[start:min(start+batch, len(rows))]
		at, id, typ := make([]string, len(part)), make([]string, len(part)), make([]string, len(part))
		pl := make([]*string, len(part))
		for i, r := range part {
			at[i], id[i], typ[i], pl[i] = r.aggType, r.aggID, r.typ, r.payload
		}
		_, err := pool.Exec(ctx, `INSERT INTO `+table+` (id, aggregatetype, aggregateid, type, payload)
			SELECT gen_random_uuid(), a, k, y, p::jsonb FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u(a, k, y, p, o) ORDER BY o`,
			at, id, typ, pl)
		if err != nil {
			t.Fatalf("insert rows %d-%d: %v", start, start+len(part)-1, err)
		}
	}
}

// consumeAll reads topics from the start until want records arrived.
func consumeAll(t *testing.T, ctx context.Context, topics []string, want int, timeout time.Duration, running ...*proc) []*kgo.Record {
	t.Helper()
	cl := testenv.Kafka(t, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20))
	var recs []*kgo.Record
	deadline := time.Now().Add(timeout)
	for len(recs) < want {
		if time.Now().After(deadline) {
			rel := 0
			for _, r := range recs {
				if testenv.Header(r, "outbox-id") != "" {
					rel++
				}
			}
			t.Fatalf("consumed %d records of %d within %s: %d of the relay, %d of Debezium", len(recs), want, timeout, rel, len(recs)-rel)
		}
		for _, p := range running {
			if err := p.failed(); err != nil {
				t.Fatal(err)
			}
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if fctx.Err() == nil {
				t.Fatalf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	return recs
}

// TestRelayWritesDebeziumsOutboxRecordsRecordForRecord runs Debezium's PostgreSQL connector
// with the Outbox Event Router at its defaults and `cdc-relay run --profile debezium` on the
// same 10,000 rows of Debezium's default outbox table, into the same topics, and compares
// every record: topic, partition, key, value bytes, Debezium's headers, the order of each
// partition, tombstones. The record timestamp is each publisher's processing time (a
// documented difference): both must lie between the commit and the consumer's read.
func TestRelayWritesDebeziumsOutboxRecordsRecordForRecord(t *testing.T) {
	ctx := needServices(t, 6*time.Minute)
	pool := testenv.Pool(t)
	name := testenv.Name(t)
	table := "public." + name
	if _, err := pool.Exec(ctx, fmt.Sprintf(debeziumTable, table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })
	types := []string{name + "_Order", name + "_Customer", name + "_Shipment", name + "_Invoice"}
	topics, dlq := debeziumTopics(t, name, types)

	// The relay's slot create makes the publication (inserts only) that both use.
	bin, slot := relaySlot(t, ctx, pool, name, table, name)
	relay := startRelayRun(t, ctx, pool, bin, slot, name, dlq)
	dside := startDebezium(t, ctx, pool, name, table, name)
	waitStreaming(t, ctx, pool, table, name+"_Warmup", relay, dside.w.p)

	const n = 10_000
	rows := goldenRows(n, types)
	written := time.Now()
	insertGolden(t, ctx, pool, table, rows, 250)
	recs := consumeAll(t, ctx, topics, 2*n, 3*time.Minute, relay)
	read := time.Now()

	var dbz, rel []*kgo.Record
	for _, r := range recs {
		if testenv.Header(r, "outbox-id") != "" {
			rel = append(rel, r)
		} else {
			dbz = append(dbz, r)
		}
	}
	if len(dbz) != n || len(rel) != n {
		t.Fatalf("Debezium wrote %d records, the relay %d; want %d each", len(dbz), len(rel), n)
	}
	byID := func(rs []*kgo.Record, who string) map[string]*kgo.Record {
		m := make(map[string]*kgo.Record, len(rs))
		for _, r := range rs {
			id := testenv.Header(r, "id")
			if id == "" || m[id] != nil {
				t.Fatalf("%s: record at %s/%d@%d has id header %q (missing or repeated)", who, r.Topic, r.Partition, r.Offset, id)
			}
			m[id] = r
		}
		return m
	}
	dm, rm := byID(dbz, "Debezium"), byID(rel, "relay")

	diffs := 0
	diff := func(format string, a ...any) {
		diffs++
		if diffs <= 20 {
			t.Errorf(format, a...)
		}
	}
	tombstones, large, documented := 0, 0, 0
	for id, d := range dm {
		r := rm[id]
		if r == nil {
			diff("id %s: Debezium wrote it, the relay did not", id)
			continue
		}
		if d.Topic != r.Topic || d.Partition != r.Partition {
			diff("id %s: Debezium %s/%d, relay %s/%d", id, d.Topic, d.Partition, r.Topic, r.Partition)
		}
		if !bytes.Equal(d.Key, r.Key) || (d.Key == nil) != (r.Key == nil) {
			diff("id %s: key: Debezium %q, relay %q", id, d.Key, r.Key)
		}
		if !bytes.Equal(d.Value, r.Value) || (d.Value == nil) != (r.Value == nil) {
			diff("id %s: value: Debezium %d bytes (nil %v) %.80q, relay %d bytes (nil %v) %.80q", id, len(d.Value), d.Value == nil, d.Value, len(r.Value), r.Value == nil, r.Value)
		}
		if d.Value == nil {
			tombstones++
		} else if len(d.Value) > 90_000 {
			large++
		}
		var dh, ctxh []string
		for _, h := range d.Headers {
			if slices.Contains(debeziumContextHeaders, h.Key) {
				ctxh = append(ctxh, h.Key)
				continue
			}
			dh = append(dh, h.Key)
			if got := testenv.Header(r, h.Key); got != string(h.Value) {
				diff("id %s: header %q: Debezium %q, relay %q", id, h.Key, h.Value, got)
			}
		}
		slices.Sort(ctxh)
		if !slices.Equal(dh, []string{"id"}) || !slices.Equal(ctxh, debeziumContextHeaders) {
			diff("id %s: Debezium's headers are %q and %q, want \"id\" and the documented %q", id, dh, ctxh, debeziumContextHeaders)
		}
		documented++
		var extra []string
		for _, h := range r.Headers {
			if !slices.Contains(dh, h.Key) {
				extra = append(extra, h.Key)
			}
		}
		slices.Sort(extra)
		if !slices.Equal(extra, relayOnlyHeaders) {
			diff("id %s: the relay's headers beyond Debezium's are %q, want the documented %q", id, extra, relayOnlyHeaders)
		}
		// The record timestamp: each publisher's time of processing the row (documented).
		for who, rec := range map[string]*kgo.Record{"Debezium": d, "relay": r} {
			if rec.Timestamp.Before(written.Truncate(time.Millisecond)) || rec.Timestamp.After(read) {
				diff("id %s: %s's record timestamp %s is outside [%s, %s]", id, who, rec.Timestamp, written, read)
			}
		}
	}
	// Per partition, the same ids in the same order.
	order := func(rs []*kgo.Record) map[string][]string {
		m := map[string][]string{}
		for _, r := range rs {
			k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
			m[k] = append(m[k], testenv.Header(r, "id"))
		}
		return m
	}
	do, ro := order(dbz), order(rel)
	for k, ids := range do {
		if !slices.Equal(ids, ro[k]) {
			diff("%s: the relay's records are not in Debezium's order (%d and %d records)", k, len(ids), len(ro[k]))
		}
	}
	wantTomb, wantLarge := 0, 0
	for _, r := range rows {
		if r.payload == nil {
			wantTomb++
		} else if len(*r.payload) > 90_000 {
			wantLarge++
		}
	}
	if tombstones != wantTomb || large != wantLarge {
		diff("%d tombstones and %d large records, want %d and %d", tombstones, large, wantTomb, wantLarge)
	}
	t.Logf("compared %d records of each publisher over %d topic-partitions (%d tombstones, %d of ~100 KB): %d differences; "+
		"documented: %d records with Debezium's context headers, the relay's own headers and each publisher's processing time as timestamp",
		n, len(do), tombstones, large, diffs, documented)
	if diffs > 0 {
		t.Fatalf("%d differences", diffs)
	}
}
