package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// stopConnector stops a connector with Connect's REST API (PUT /connectors/<name>/stop: its
// task flushes its producer, commits its offsets and ends; the connector stays, for a way
// back) and waits until Connect reports it STOPPED.
func stopConnector(t *testing.T, ctx context.Context, w *connectWorker, name string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, w.rest+"/connectors/"+name+"/stop", nil)
	resp, err := w.http.Do(req)
	if err != nil {
		t.Fatalf("stop connector %s: %v", name, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("stop connector %s: %s", name, resp.Status)
	}
	err = waitUntil(ctx, 2*time.Minute, w.p, "connector "+name+" to stop", func() (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.rest+"/connectors/"+name+"/status", nil)
		resp, err := w.http.Do(req)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		var st struct {
			Connector struct{ State string } `json:"connector"`
			Tasks     []json.RawMessage      `json:"tasks"`
		}
		return json.NewDecoder(resp.Body).Decode(&st) == nil && st.Connector.State == "STOPPED" && len(st.Tasks) == 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// slotPosition returns a slot's confirmed_flush_lsn and whether a walsender holds it.
func slotPosition(t *testing.T, ctx context.Context, pool *pgxpool.Pool, slot string) (pglogrepl.LSN, bool) {
	t.Helper()
	var s string
	var active bool
	if err := pool.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s, &active); err != nil {
		t.Fatalf("slot %s: %v", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn, active
}

// TestSwitchFromARunningDebeziumLosesNoRowAndKeepsKeyOrder follows docs/debezium.md's switch
// procedure while rows commit at 1,000 a second: create the relay's slot, wait until
// Debezium's slot has confirmed past it, stop Debezium's connector, start `run --profile
// debezium`. Every committed row must be on Kafka, each key's first occurrences in commit
// order, and the duplicates exactly the rows both published, which the procedure counts
// beforehand from the two slots' positions.
func TestSwitchFromARunningDebeziumLosesNoRowAndKeepsKeyOrder(t *testing.T) {
	ctx := needServices(t, 6*time.Minute)
	pool := testenv.Pool(t)
	name := testenv.Name(t)
	table := "public." + name
	if _, err := pool.Exec(ctx, fmt.Sprintf(debeziumTable, table)+`; ALTER TABLE `+table+` ADD COLUMN seq bigint`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })
	types := []string{name + "_Order", name + "_Customer"}
	topics, dlq := debeziumTopics(t, name, types)
	// Debezium's publication, as a team running it has one (inserts, this table).
	if _, err := pool.Exec(ctx, `CREATE PUBLICATION `+pgx.Identifier{name}.Sanitize()+` FOR TABLE `+table+` WITH (publish = 'insert')`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `DROP PUBLICATION IF EXISTS `+pgx.Identifier{name}.Sanitize())
	})

	// Debezium as a team runs it, its offsets flushed every second (the default, 60 s, only
	// makes the procedure's second step wait longer).
	dbz := startDebezium(t, ctx, pool, name, table, name, "worker.offset.flush.interval.ms=1000")
	waitStreaming(t, ctx, pool, table, name+"_Warmup", dbz.w.p)

	bin, err := BuildRelay(ctx, t.TempDir()) // before the load: a build would starve it
	if err != nil {
		t.Fatal(err)
	}

	// The load: 1,000 rows a second, ten per transaction, 50 keys; seq is the commit order.
	var written atomic.Int64
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var loadErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for seq := int64(0); ; {
			// Paced: a transaction each 10 ms, and at once while behind (a busy machine).
			if seq >= time.Since(start).Milliseconds() {
				select {
				case <-loadCtx.Done():
					return
				case <-tick.C:
				}
			} else if loadCtx.Err() != nil {
				return
			}
			b := &pgx.Batch{}
			for range 10 {
				k := seq % 50
				b.Queue(`INSERT INTO `+table+` (id, aggregatetype, aggregateid, type, payload, seq) VALUES (gen_random_uuid(), $1, $2, 'Load', $3::jsonb, $4)`,
					types[k%2], fmt.Sprintf("キー-%d", k), fmt.Sprintf(`{"seq": %d, "key": %d}`, seq, k), seq)
				seq++
			}
			// One transaction of ten rows (pgx sends a batch in one implicit transaction).
			if err := pool.SendBatch(ctx, b).Close(); err != nil {
				loadErr = err
				return
			}
			written.Add(10)
		}
	}()
	defer func() { stopLoad(); wg.Wait() }()
	loadStart := time.Now()
	time.Sleep(3 * time.Second) // Debezium alone under load for a while: this is the load, not a wait for a condition

	// 1. The relay's slot: from here on the relay has every committed row.
	slot := createRelaySlot(t, ctx, pool, bin, name, table, name)
	p0, _ := slotPosition(t, ctx, pool, slot)
	// 2. Debezium has published, and confirmed, everything before it.
	err = waitUntil(ctx, 2*time.Minute, dbz.w.p, "Debezium's slot to confirm past the relay's", func() (bool, error) {
		d, _ := slotPosition(t, ctx, pool, dbz.slot)
		return d >= p0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// 3. Stop Debezium's connector; its slot's final position bounds what both publish.
	stopConnector(t, ctx, dbz.w, "outbox-"+name)
	err = waitUntil(ctx, time.Minute, nil, "Debezium's slot to be released", func() (bool, error) {
		_, active := slotPosition(t, ctx, pool, dbz.slot)
		return !active, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dEnd, _ := slotPosition(t, ctx, pool, dbz.slot)
	// 4. The relay.
	relay := startRelayRun(t, ctx, pool, bin, slot, name, dlq)
	time.Sleep(3 * time.Second) // the relay alone under load: the load's duration, not a wait for a condition
	stopLoad()
	wg.Wait()
	if loadErr != nil {
		t.Fatalf("load: %v", loadErr)
	}
	// The writer keeps 1,000 rows a second unless the shared machine starves it; well below
	// that the switch was not under the load this test claims.
	rate := float64(written.Load()) / time.Since(loadStart).Seconds()
	if rate < 700 {
		t.Fatalf("the load reached %.0f rows/s, want about 1,000 (at least 700)", rate)
	}

	// Every committed row, by id, with its seq and key.
	type row struct {
		seq int64
		key string
	}
	committed := map[string]row{}
	rs, err := pool.Query(ctx, `SELECT id::text, seq, aggregateid FROM `+table+` WHERE type = 'Load'`)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id string
		var r row
		if err := rs.Scan(&id, &r.seq, &r.key); err != nil {
			t.Fatal(err)
		}
		committed[id] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if int64(len(committed)) != written.Load() || len(committed) < 5000 {
		t.Fatalf("%d rows in the table, the load wrote %d; want the same, at least 5,000", len(committed), written.Load())
	}

	cl := testenv.Kafka(t, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string][]*kgo.Record{}
	var all []*kgo.Record // in each partition's order: a key has one partition
	deadline := time.Now().Add(2 * time.Minute)
	for len(seen) < len(committed) {
		if time.Now().After(deadline) {
			break
		}
		if err := relay.failed(); err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			all = append(all, r)
			if id := testenv.Header(r, "id"); id != "" {
				seen[id] = append(seen[id], r)
			}
		})
	}
	lost := 0
	for id := range committed {
		if seen[id] == nil {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d committed rows are not on Kafka", lost, len(committed))
	}

	// Duplicates: a row both published. The procedure bounds them from the slots: the relay's
	// records whose transaction Debezium's slot had confirmed when it stopped (cdc-lsn at or
	// below dEnd), plus at most the next transaction, which Debezium publishes before it
	// confirms it.
	dups, predicted, byDbz := 0, 0, 0
	next := pglogrepl.LSN(1<<64 - 1)
	txRows := map[pglogrepl.LSN]int{}
	for id, recs := range seen {
		if _, ok := committed[id]; !ok {
			continue // a warm-up row
		}
		var fromRelay *kgo.Record
		for _, r := range recs {
			if testenv.Header(r, "outbox-id") != "" {
				fromRelay = r
			} else {
				byDbz++
			}
		}
		if len(recs) > 2 || (len(recs) == 2 && fromRelay == nil) {
			t.Errorf("id %s published %d times (relay: %v)", id, len(recs), fromRelay != nil)
		}
		if len(recs) == 2 {
			dups++
		}
		if fromRelay != nil {
			lsn, err := pglogrepl.ParseLSN(testenv.Header(fromRelay, "cdc-lsn"))
			if err != nil {
				t.Fatalf("id %s: cdc-lsn: %v", id, err)
			}
			txRows[lsn]++
			if lsn <= dEnd {
				predicted++
			} else {
				next = min(next, lsn)
			}
		}
	}
	bound := predicted + txRows[next]

	// Per key, first occurrences in commit order, reading each partition in order.
	last := map[string]int64{}
	firstSeen := map[string]bool{}
	outOfOrder := 0
	for _, r := range all {
		id := testenv.Header(r, "id")
		row, ok := committed[id]
		if !ok || firstSeen[id] {
			continue
		}
		firstSeen[id] = true
		if prev, ok := last[row.key]; ok && row.seq < prev {
			outOfOrder++
		}
		last[row.key] = row.seq
	}
	t.Logf("switch under %.0f rows/s: %d rows committed, 0 lost; Debezium published %d, the relay %d; %d duplicates (the slots bound them to %d-%d); relay slot created at %s, Debezium stopped at %s",
		rate, len(committed), byDbz, len(committed)-byDbz+dups, dups, predicted, bound, p0, dEnd)
	if outOfOrder > 0 {
		t.Errorf("%d rows arrived, first, behind a later row of their key", outOfOrder)
	}
	if dups < predicted || dups > bound {
		t.Errorf("%d duplicates, but the slots bound them to %d-%d (cdc-lsn at or below Debezium's final position %s, and the next transaction): the procedure's count is wrong",
			dups, predicted, bound, dEnd)
	}
}
