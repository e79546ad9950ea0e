package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/poller"
	"github.com/cdc-relay/cdc-relay/testkit/build"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// partitionSize is how many ids each partition of newPartitionedOutbox holds: partition k
// (1-based) holds ids [(k-1)*partitionSize+1, k*partitionSize+1).
const partitionSize = 100

// newPartitionedOutbox is a fixture whose table is the outbox partitioned by id range, in
// schema app (the way large outboxes are pruned: a partition dropped instead of DELETE), with
// partitions _p1 and _p2 attached. The slot and publication are left to the test; all of it is
// dropped at cleanup.
func newPartitionedOutbox(t *testing.T) *testenv.Fixture {
	t.Helper()
	n := testenv.Name(t)
	f := &testenv.Fixture{Name: n, Table: "app." + n, Publication: n, Slot: n, Topic: n + ".events", DLQ: n + ".dlq", Pool: testenv.Pool(t)}
	ctx := context.Background()
	// Tests create the schema concurrently: one of them may lose the race on the catalog.
	if _, err := f.Pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS app`); err != nil {
		var ok bool
		if qerr := f.Pool.QueryRow(ctx, `SELECT true FROM pg_namespace WHERE nspname = 'app'`).Scan(&ok); qerr != nil {
			t.Fatalf("create schema app: %v", err)
		}
	}
	ddl := strings.Replace(testenv.OutboxDDL(f.Table), "id            BIGSERIAL    PRIMARY KEY", "id            BIGSERIAL", 1)
	ddl = strings.Replace(ddl, "published_at  TIMESTAMPTZ  NULL\n)", "published_at  TIMESTAMPTZ  NULL,\n    PRIMARY KEY (id)\n) PARTITION BY RANGE (id)", 1)
	if _, err := f.Pool.Exec(ctx, ddl); err != nil {
		t.Fatalf("create %s: %v\n%s", f.Table, err, ddl)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.DropReplication(ctx)
		_, _ = f.Pool.Exec(ctx, `DROP TABLE IF EXISTS `+f.Table+` CASCADE`)
		for k := 1; k <= 9; k++ { // detached partitions are tables of their own
			_, _ = f.Pool.Exec(ctx, `DROP TABLE IF EXISTS `+partitionName(f, k))
		}
	})
	addPartition(t, f, 1)
	addPartition(t, f, 2)
	testenv.CreateTopic(t, f.Topic, 3)
	testenv.CreateTopic(t, f.DLQ, 1)
	return f
}

// partitionName is partition k of f's table, "app.<name>_p<k>".
func partitionName(f *testenv.Fixture, k int) string { return fmt.Sprintf("%s_p%d", f.Table, k) }

// addPartition creates partition k of f's table.
func addPartition(t *testing.T, f *testenv.Fixture, k int) {
	t.Helper()
	sql := fmt.Sprintf(`CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (%d) TO (%d)`,
		partitionName(f, k), f.Table, (k-1)*partitionSize+1, k*partitionSize+1)
	if _, err := f.Pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// insertInPartition inserts n rows into partition k (1-based) of f's table, one transaction,
// by moving the id sequence to the partition's first free id.
func insertInPartition(t *testing.T, f *testenv.Fixture, k, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	var last int64
	if err := f.Pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+f.Table+` WHERE id BETWEEN $1 AND $2`,
		(k-1)*partitionSize+1, k*partitionSize).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if last == 0 {
		last = int64((k - 1) * partitionSize)
	}
	if _, err := f.Pool.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), $2, false)`, f.Table, last+1); err != nil {
		t.Fatal(err)
	}
	rows := make([]testenv.Row, n)
	for i := range rows {
		rows[i] = testenv.Row{Key: fmt.Sprintf("k%d", i%3), Payload: fmt.Sprintf(`{"partition":%d,"i":%d}`, k, i)}
	}
	return f.Insert(t, false, rows...)
}

// allNameTable fails the test unless every record's outbox-table header is table.
func allNameTable(t *testing.T, recs []*kgo.Record, table string) {
	t.Helper()
	for _, r := range recs {
		if got := testenv.Header(r, "outbox-table"); got != table {
			t.Errorf("record outbox-id %s: outbox-table %q, want the partitioned table's name %q (one table for consumers that dedupe on it)",
				testenv.Header(r, "outbox-id"), got, table)
		}
	}
}

// pubViaRoot reads the publication's publish_via_partition_root.
func pubViaRoot(t *testing.T, f *testenv.Fixture) bool {
	t.Helper()
	var v bool
	if err := f.Pool.QueryRow(context.Background(), `SELECT pubviaroot FROM pg_publication WHERE pubname = $1`, f.Publication).Scan(&v); err != nil {
		t.Fatalf("read publication %s: %v", f.Publication, err)
	}
	return v
}

// A partitioned outbox is published under the name the user gave: `slot create --table
// app.outbox` makes a publication through the partition root, a second run is a no-op (it was
// "relation is already member of publication", exit 1), and rows committed in two partitions
// reach Kafka each naming the root table, never the partition that holds it.
func TestSlotCreatePublishesAPartitionedOutboxUnderItsOwnName(t *testing.T) {
	t.Parallel()
	f := newPartitionedOutbox(t)
	e := testenv.RelayEnvOf(t, f, false)
	for run := 1; run <= 2; run++ {
		out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, e.Env, "slot", "create", "--table", f.Table)
		if code != 0 {
			t.Fatalf("slot create, run %d: exit %d, want 0 (a second run is a no-op)\n%s%s", run, code, out, errOut)
		}
		if run == 2 && !strings.Contains(out, "already exists") {
			t.Errorf("second slot create: want it to report that the publication and slot exist, got:\n%s", out)
		}
	}
	if !pubViaRoot(t, f) {
		t.Fatalf("publication %s: publish_via_partition_root is off after slot create on a partitioned table", f.Publication)
	}

	cons := testenv.Consume(t, f.Topic)
	p := e.Start(t, nil, "--table", f.Table)
	want := append(insertInPartition(t, f, 1, 3), insertInPartition(t, f, 2, 3)...)
	recs := cons.WaitFor(t, 60*time.Second, "the rows of both partitions", hasAll(want))
	allNameTable(t, recs, f.Table)
	recs = e.Settle(t, cons, f.CurrentWAL(t))
	assertCleanDelivery(t, recs, want, nil)
	if code := p.Stop(t); code != 0 {
		t.Errorf("run: exit %d after SIGTERM, want 0", code)
	}
}

// A publication made by hand that publishes a partitioned outbox through its partitions would
// name a partition in every record: `run` refuses it at start (exit 2) with the statement that
// fixes it, publishing nothing, and `slot create` repairs it.
func TestRunRefusesAPartitionedOutboxPublishedUnderItsPartitionsNames(t *testing.T) {
	t.Parallel()
	f := newPartitionedOutbox(t)
	ctx := context.Background()
	pub := pgx.Identifier{f.Publication}.Sanitize()
	if _, err := f.Pool.Exec(ctx, `CREATE PUBLICATION `+pub+` FOR TABLE `+f.Table+` WITH (publish = 'insert')`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, f.Slot); err != nil {
		t.Fatal(err)
	}
	insertInPartition(t, f, 1, 2)
	bin := testenv.Binary(t, false)
	env := f.SlotEnv()
	_, stderr, code := testenv.Run(t, 30*time.Second, bin, env, "run", "--dlq-topic", f.DLQ, "--table", f.Table)
	if code != 2 {
		t.Fatalf("run: exit %d, want 2 (a publication that would name partitions); stderr:\n%s", code, stderr)
	}
	fix := `ALTER PUBLICATION ` + pub + ` SET (publish_via_partition_root = true)`
	for _, w := range []string{f.Table, fix} {
		if !strings.Contains(stderr, w) {
			t.Errorf("run's refusal does not say %q; stderr:\n%s", w, stderr)
		}
	}
	if n := testenv.EndOffset(t, f.Topic); n != 0 {
		t.Errorf("the refused run published %d records", n)
	}
	if pubViaRoot(t, f) {
		t.Fatal("run changed the publication: it must only say what to run")
	}

	out, errOut, code := testenv.Run(t, 30*time.Second, bin, env, "slot", "create", "--table", f.Table)
	if code != 0 {
		t.Fatalf("slot create on the hand-made publication: exit %d, want 0 (it repairs it)\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "publish_via_partition_root = true") {
		t.Errorf("slot create does not say it repaired the publication:\n%s", out)
	}
	if !pubViaRoot(t, f) {
		t.Fatal("slot create left publish_via_partition_root off")
	}
}

// After a promotion below PostgreSQL 17 the slot is gone, and a supervisor's restart of `run`
// (no --table: every table of the publication) is told to cut over. The advice names the table
// the publication publishes on the promoted server, the partitioned table by its root, never
// --table's default public.outbox (run as printed, that cut over the wrong table, or exited 2),
// and it cites a section of the docs that exists.
func TestRunAfterAPromotionAdvisesCutoverOfThePublishedTable(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "the PostgreSQL server binaries", "CDC_RELAY_DEV_PG_BIN")
	srv := testenv.StartPGServer(t, os.Getenv("CDC_RELAY_DEV_PG_BIN"), "cdc-relay-promoted", "promoted", "wal_level = logical")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`CREATE SCHEMA app`,
		`CREATE TABLE public.outbox (id bigserial PRIMARY KEY)`, // the default's table exists: the wrong advice would work on it
		`CREATE TABLE app.outbox (id bigserial, payload jsonb, PRIMARY KEY (id)) PARTITION BY RANGE (id)`,
		`CREATE TABLE app.outbox_2025 PARTITION OF app.outbox FOR VALUES FROM (1) TO (1000)`,
		`CREATE PUBLICATION relay_pub FOR TABLE app.outbox WITH (publish = 'insert', publish_via_partition_root = true)`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	conn.Close(ctx)
	// Promote the server itself: stopped, started as a standby with no primary, promoted; it
	// is then on timeline 2 with no slot, as a promoted standby below 17 is.
	testenv.MustRun(t, testenv.AsPG(filepath.Join(srv.Bin, "pg_ctl"), "stop", "-D", srv.Data, "-m", "fast", "-w", "-s"))
	srv.WriteFile(t, "standby.signal", "")
	srv.Start(t)
	srv.Promote(t)

	bin := testenv.Binary(t, false)
	_, stderr, code := testenv.Run(t, 60*time.Second, bin, []string{"CDC_RELAY_PG_URL=" + srv.URL("postgres")},
		"run", "--slot", "relay_slot", "--publication", "relay_pub")
	if code != 2 || !strings.Contains(stderr, "has been promoted (timeline 2") {
		t.Fatalf("run on a promoted server without its slot: exit %d, want 2 with the promotion's advice; stderr:\n%s", code, stderr)
	}
	if want := "cdc-relay cutover --slot relay_slot --publication relay_pub --table app.outbox`"; !strings.Contains(stderr, want) {
		t.Errorf("the advice does not name the published table: want %q in:\n%s", want, stderr)
	}
	if strings.Contains(stderr, "public.outbox") {
		t.Errorf("the advice names --table's default public.outbox, a table the slot never streamed:\n%s", stderr)
	}
	// The cited section: docs/failover.md, "HEADING", "PARAGRAPH".
	m := regexp.MustCompile(`\((docs/[a-z]+\.md), "([^"]+)"`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the advice cites no section of docs/: %s", stderr)
	}
	root, err := build.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, m[1]))
	if err != nil {
		t.Fatalf("the advice cites %s: %v", m[1], err)
	}
	if !regexp.MustCompile(`(?m)^#+ ` + regexp.QuoteMeta(m[2]) + `$`).Match(doc) {
		t.Errorf("the advice cites section %q of %s, which has no such heading", m[2], m[1])
	}
}

// Partitions come and go while the relay streams a partitioned outbox (one created, a table
// attached, one detached, one dropped, each right after rows were committed in it): every row
// reaches Kafka exactly once, each naming the partitioned table, and the publication needs no
// change for a new partition.
func TestPartitionsAttachedDetachedAndDroppedWhileStreamingLoseNothing(t *testing.T) {
	t.Parallel()
	f := newPartitionedOutbox(t)
	e := testenv.RelayEnvOf(t, f, false)
	e.CreateSlot(t, f.Table)
	cons := testenv.Consume(t, f.Topic)
	p := e.Start(t, nil, "--table", f.Table)
	exec := func(sql string) {
		t.Helper()
		if _, err := f.Pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var want []int64
	want = append(want, insertInPartition(t, f, 1, 3)...)
	want = append(want, insertInPartition(t, f, 2, 3)...)
	addPartition(t, f, 3) // created as a partition
	want = append(want, insertInPartition(t, f, 3, 3)...)
	// A table of its own, attached.
	exec(`CREATE TABLE ` + partitionName(f, 4) + ` (LIKE ` + f.Table + `)`)
	exec(fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`, f.Table, partitionName(f, 4), 3*partitionSize+1, 4*partitionSize+1))
	want = append(want, insertInPartition(t, f, 4, 3)...)
	// Detached and dropped right after their rows' commits, before the relay need have read them.
	exec(`ALTER TABLE ` + f.Table + ` DETACH PARTITION ` + partitionName(f, 1))
	want = append(want, insertInPartition(t, f, 2, 2)...)
	exec(`DROP TABLE ` + partitionName(f, 2))
	want = append(want, insertInPartition(t, f, 3, 2)...)

	recs := cons.WaitFor(t, 60*time.Second, "the rows of every partition", hasAll(want))
	allNameTable(t, recs, f.Table)
	recs = e.Settle(t, cons, f.CurrentWAL(t))
	assertCleanDelivery(t, recs, want, nil)
	allNameTable(t, recs, f.Table)
	if n := testenv.EndOffset(t, f.DLQ); n != 0 {
		t.Errorf("%d rows dead-lettered", n)
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("run: exit %d after SIGTERM, want 0", code)
	}
}

// poll and cutover work on a partitioned outbox as on a table: poll (FOR UPDATE SKIP LOCKED
// through the partitioned table) publishes and marks the rows of every partition, cutover makes
// the publication through the partition root and publishes what is pending, and the relay then
// streams the rest; every record names the partitioned table, each row exactly once.
func TestPollAndCutoverOnAPartitionedOutbox(t *testing.T) {
	t.Parallel()
	f := newPartitionedOutbox(t)
	bin := testenv.Binary(t, false)
	env := f.SlotEnv()
	if out, errOut, code := testenv.Run(t, 30*time.Second, bin, nil, "poll", "--create-index", "--table", f.Table); code != 0 {
		t.Fatalf("poll --create-index: exit %d\n%s%s", code, out, errOut)
	}
	// PostgreSQL builds no index concurrently on a partitioned table: the table's index is
	// valid once every partition's is built and attached.
	var valid bool
	if err := f.Pool.QueryRow(context.Background(), `SELECT i.indisvalid FROM pg_index i
		WHERE i.indrelid = to_regclass($1) AND i.indexrelid = to_regclass($2)`,
		f.Table, "app."+poller.IndexName(f.Table)).Scan(&valid); err != nil || !valid {
		t.Fatalf("poll --create-index: the partitioned table's pending-rows index: valid %v, %v", valid, err)
	}
	cons := testenv.Consume(t, f.Topic)
	polled := append(insertInPartition(t, f, 1, 3), insertInPartition(t, f, 2, 3)...)
	poller := testenv.Start(t, bin, nil, "poll", "--table", f.Table, "--dlq-topic", f.DLQ, "--interval", "20ms")
	cons.WaitFor(t, 60*time.Second, "the polled rows of both partitions", hasAll(polled))
	testenv.Eventually(t, 30*time.Second, "the poller to mark its rows in both partitions", func() bool {
		var pending int
		if err := f.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+f.Table+` WHERE published_at IS NULL`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	})
	if code := poller.Stop(t); code != 0 {
		t.Fatalf("poll: exit %d after SIGTERM, want 0", code)
	}

	pending := append(insertInPartition(t, f, 1, 2), insertInPartition(t, f, 2, 2)...)
	out, errOut, code := testenv.Run(t, 120*time.Second, bin, env, "cutover", "--table", f.Table, "--dlq-topic", f.DLQ)
	if code != 0 {
		t.Fatalf("cutover: exit %d\n%s%s", code, out, errOut)
	}
	if !pubViaRoot(t, f) {
		t.Fatalf("cutover made publication %s without publish_via_partition_root", f.Publication)
	}
	re := &testenv.RelayEnv{F: f, Bin: bin, Env: env}
	relay := re.Start(t, nil, "--table", f.Table)
	streamed := append(insertInPartition(t, f, 1, 2), insertInPartition(t, f, 2, 2)...)
	want := append(append(append([]int64{}, polled...), pending...), streamed...)
	cons.WaitFor(t, 60*time.Second, "the polled, cut-over and streamed rows", hasAll(want))
	recs := re.Settle(t, cons, f.CurrentWAL(t))
	assertCleanDelivery(t, recs, want, nil)
	allNameTable(t, recs, f.Table)
	if code := relay.Stop(t); code != 0 {
		t.Errorf("run: exit %d after SIGTERM, want 0", code)
	}
}
