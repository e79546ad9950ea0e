package failover

import (
	"context"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// fixture is one test's outbox table, slot, publication and topic on a cluster.
type fixture struct {
	c                       *cluster
	bin                     string
	table, slot, pub, topic string
	dlq                     string
	pool                    *pgxpool.Pool // multi-host, read-write: whichever server is the primary
	w                       *testenv.Writer
	cons                    *testenv.Consumer
}

func newFixture(t *testing.T, c *cluster) *fixture {
	t.Helper()
	n := testenv.Name(t)
	f := &fixture{c: c, bin: testenv.Binary(t, false), table: "public." + n, slot: n, pub: n, topic: n + ".events", dlq: n + ".dlq"}
	p := c.connect(t, c.primary, db)
	defer p.Close(context.Background())
	if _, err := p.Exec(context.Background(), testenv.OutboxDDL(f.table)); err != nil {
		t.Fatalf("create %s: %v", f.table, err)
	}
	testenv.CreateTopic(t, f.topic, 3)
	testenv.CreateTopic(t, f.dlq, 1)
	pool, err := pgxpool.New(context.Background(), c.multiHost())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f.pool = pool
	f.w = testenv.NewWriter(pool, f.table, f.topic)
	f.cons = testenv.Consume(t, f.topic)
	return f
}

// write starts the writer, a transaction every 5 ms, until its Finish: 300 more rows, then
// every committed row and every record on the topic read and verified.
func (f *fixture) write(t *testing.T) *testenv.Writing {
	return f.w.Start(t, f.cons, 5*time.Millisecond)
}

// cli runs a cdc-relay command to completion and returns its output and exit code.
func (f *fixture) cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := testenv.Run(t, 2*time.Minute, f.bin, nil, args...)
	return out + errOut, code
}

// relay starts `cdc-relay run` on url.
func (f *fixture) relay(t *testing.T, url string) *testenv.Proc {
	t.Helper()
	return testenv.Start(t, f.bin, nil, "run", "--pg-url", url, "--slot", f.slot, "--publication", f.pub,
		"--dlq-topic", f.dlq, "--status-interval", "1s", "--metrics-addr", "127.0.0.1:0", "--slot-status-interval", "1s")
}

// gap is the longest pause in the relay's publishing from a second before the failover at
// stop on (Kafka record timestamps are the relay's produce times): the last record before the
// pause and the first after it. Records produced just after the stop still came from the old
// session; the pause is the reconnect.
func gap(recs []*kgo.Record, stop time.Time) (last, first time.Time) {
	var ts []time.Time
	for _, r := range recs {
		if r.Timestamp.After(stop.Add(-time.Second)) {
			ts = append(ts, r.Timestamp)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	for i := 1; i < len(ts); i++ {
		if d := ts[i].Sub(ts[i-1]); d > first.Sub(last) {
			last, first = ts[i-1], ts[i]
		}
	}
	return last, first
}

var syncedAfter = regexp.MustCompile(`synced, persisted\) after ([0-9.]+m?s)`)

// TestFailoverSlotRidesThroughPromotion runs the relay on a multi-host URL with a slot made by
// `slot create --failover`, writes steadily, stops the primary with -m immediate and promotes
// the standby: the relay carries on from the promoted standby's copy of the slot with no
// manual step, and every row a writer saw committed, on either server, reaches Kafka, per key
// in order.
func TestFailoverSlotRidesThroughPromotion(t *testing.T) {
	for _, major := range []int{17, 18} {
		t.Run(strconv.Itoa(major), func(t *testing.T) { failoverRide(t, major) })
	}
}

func failoverRide(t *testing.T, major int) {
	c := newCluster(t, major)
	f := newFixture(t, c)
	mh := c.multiHost()

	out, code := f.cli(t, "slot", "create", "--pg-url", mh, "--slot", f.slot, "--publication", f.pub, "--table", f.table,
		"--failover", "--standby-url", c.standby.URL(db))
	if code != 0 {
		t.Fatalf("slot create --failover: exit %d\n%s", code, out)
	}
	m := syncedAfter.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("slot create --failover did not say when the standby had the slot:\n%s", out)
	}
	if strings.Contains(out, "warning") {
		t.Errorf("slot create --failover warned on a cluster set up for failover:\n%s", out)
	}
	synced, _ := time.ParseDuration(m[1])
	if synced > 10*time.Second {
		t.Errorf("the standby had the new slot after %s, want within seconds", synced)
	}

	w := f.write(t)
	r := f.relay(t, mh)
	f.cons.WaitFor(t, 60*time.Second, "records before the failover", func(recs []*kgo.Record) bool { return len(recs) >= 200 })

	status, code := f.cli(t, "slot", "status", "--pg-url", mh, "--slot", f.slot, "--standby-url", c.standby.URL(db))
	if code != 0 || !regexp.MustCompile(`failover\s+yes`).MatchString(status) || !strings.Contains(status, "synced and persisted") {
		t.Fatalf("slot status before the failover: exit %d, want failover yes and the standby's copy synced:\n%s", code, status)
	}

	var primaryAt, copyAt string
	pc, sc := c.connect(t, c.primary, db), c.connect(t, c.standby, db)
	q := `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`
	_ = pc.QueryRow(context.Background(), q, f.slot).Scan(&primaryAt)
	_ = sc.QueryRow(context.Background(), q, f.slot).Scan(&copyAt)
	pc.Close(context.Background())
	sc.Close(context.Background())
	t.Logf("before the stop: the slot confirmed %s on the primary, %s in the standby's copy", primaryAt, copyAt)

	stop := time.Now()
	c.primary.StopImmediate(t)
	c.standby.Promote(t)
	promoted := time.Since(stop)
	n := len(f.w.Committed())
	recs, dups := w.Finish(t, 300, "rows committed on the promoted standby", 2*time.Minute)
	if r.Exited() {
		t.Fatalf("the relay exited during the failover:\n%s", r.Output())
	}
	last, first := gap(recs, stop)
	g := first.Sub(last)
	t.Logf("PostgreSQL %d: standby had the new slot after %s; %d rows committed (%d after the promotion), %d records, %d duplicates; "+
		"promotion took %s; gap %s (last record before it at stop%+s, first after at stop%+s)",
		major, synced, len(f.w.Committed()), len(f.w.Committed())-n, len(recs), dups, promoted.Round(time.Millisecond),
		g.Round(time.Millisecond), last.Sub(stop).Round(time.Millisecond), first.Sub(stop).Round(time.Millisecond))
	if g > 2*time.Second {
		t.Errorf("gap %s around the failover, want under a second or two", g)
	}
	if code := r.Stop(t); code != 0 {
		t.Errorf("relay exit %d after SIGTERM, want 0\n%s", code, r.Output())
	}
	after, code := f.cli(t, "slot", "status", "--pg-url", mh, "--slot", f.slot)
	if code != 0 || !regexp.MustCompile(`server\s+PostgreSQL \d+, primary`).MatchString(after) || !regexp.MustCompile(`failover\s+yes`).MatchString(after) {
		t.Errorf("slot status on the promoted standby: exit %d\n%s", code, after)
	}
}

// TestBelow17RecoveryProcedure fails over PostgreSQL 16, whose logical slots stay on the old
// primary: the relay finds no slot on the promoted standby, sees the new timeline and exits 1
// with the recovery steps; following them (cutover against the new primary, then run) loses
// no row a writer saw committed, while the writer keeps writing throughout.
func TestBelow17RecoveryProcedure(t *testing.T) {
	c := newCluster(t, 16)
	f := newFixture(t, c)
	mh := c.multiHost()
	if out, code := f.cli(t, "slot", "create", "--pg-url", mh, "--slot", f.slot, "--publication", f.pub, "--table", f.table); code != 0 {
		t.Fatalf("slot create: exit %d\n%s", code, out)
	}
	if out, code := f.cli(t, "slot", "create", "--pg-url", mh, "--slot", f.slot+"_f", "--publication", f.pub, "--table", f.table, "--failover"); code != 2 ||
		!strings.Contains(out, "PostgreSQL 17 or later") {
		t.Errorf("slot create --failover on 16: exit %d, want 2 saying 17 or later:\n%s", code, out)
	}
	w := f.write(t)
	r := f.relay(t, mh)
	f.cons.WaitFor(t, 60*time.Second, "records before the failover", func(recs []*kgo.Record) bool { return len(recs) >= 200 })

	c.primary.StopImmediate(t)
	c.standby.Promote(t)
	code, _ := r.Wait(t, 60*time.Second)
	out := r.Output()
	if code != 1 || !strings.Contains(out, "timeline 2 while the relay started on timeline 1") || !strings.Contains(out, "cdc-relay cutover --slot "+f.slot) {
		t.Fatalf("relay after the promotion: exit %d, want 1 with the timeline and the recovery steps:\n%s", code, out)
	}
	// Its supervisor restarts it: the new start finds no slot on a server that was promoted, and
	// gives the same procedure, not "create it with `cdc-relay slot create`" (a slot created now
	// would never publish the rows committed since the old slot's confirmed position).
	restarted := f.relay(t, mh)
	code, _ = restarted.Wait(t, 60*time.Second)
	out = restarted.Output()
	if code != 2 || !strings.Contains(out, "has been promoted (timeline 2") || !strings.Contains(out, "cdc-relay cutover --slot "+f.slot) ||
		strings.Contains(out, "create it with `cdc-relay slot create") {
		t.Fatalf("relay restarted after the promotion: exit %d, want 2 with the cutover procedure:\n%s", code, out)
	}

	// The procedure, with the writer still writing.
	if out, code := f.cli(t, "cutover", "--pg-url", mh, "--slot", f.slot, "--publication", f.pub, "--table", f.table, "--dlq-topic", f.dlq); code != 0 {
		t.Fatalf("cutover on the new primary: exit %d\n%s", code, out)
	}
	r2 := f.relay(t, mh)
	recs, dups := w.Finish(t, 300, "rows committed after the restart", 2*time.Minute)
	t.Logf("PostgreSQL 16: %d rows committed, %d records, %d duplicates (cutover republished every pending row)", len(f.w.Committed()), len(recs), dups)
	if code := r2.Stop(t); code != 0 {
		t.Errorf("relay exit %d after SIGTERM, want 0\n%s", code, r2.Output())
	}
}

// TestDecodingFromStandby runs the relay against a PostgreSQL 17 hot standby, with the slot
// created on the standby by `slot create --primary-url` and the writes on the primary: every row
// arrives, and while the outbox is idle and other tables are written the standby's slot moves
// on (confirmed_flush_lsn with the keepalives, restart_lsn at a running-transactions record).
func TestDecodingFromStandby(t *testing.T) {
	c := newCluster(t, 17)
	f := newFixture(t, c)
	p := c.connect(t, c.primary, db)
	defer p.Close(context.Background())
	s := c.connect(t, c.standby, db)
	defer s.Close(context.Background())
	ctx := context.Background()

	// A standby cannot make the publication: slot create says where to.
	out, code := f.cli(t, "slot", "create", "--pg-url", c.standby.URL(db), "--slot", f.slot, "--publication", f.pub, "--table", f.table)
	if code != 2 || !strings.Contains(out, "standby (read-only)") || !strings.Contains(out, "CREATE PUBLICATION") {
		t.Errorf("slot create on a standby without the publication: exit %d, want 2 naming the primary and the DDL:\n%s", code, out)
	}
	if _, err := p.Exec(ctx, "CREATE PUBLICATION "+f.pub+" FOR TABLE "+f.table+" WITH (publish = 'insert')"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the publication on the standby", func() bool {
		var n int
		_ = s.QueryRow(ctx, `SELECT count(*) FROM pg_publication WHERE pubname = $1`, f.pub).Scan(&n)
		return n == 1
	})
	out, code = f.cli(t, "slot", "create", "--pg-url", c.standby.URL(db), "--primary-url", c.primary.URL(db),
		"--slot", f.slot, "--publication", f.pub, "--table", f.table)
	if code != 0 || !strings.Contains(out, "the slot is on a standby") {
		t.Fatalf("slot create on the standby: exit %d\n%s", code, out)
	}

	w := f.write(t)
	r := f.relay(t, c.standby.URL(db))
	f.cons.WaitFor(t, 60*time.Second, "records from the standby", func(recs []*kgo.Record) bool { return len(recs) >= 300 })
	if _, dups := w.Finish(t, 0, "", 60*time.Second); dups != 0 {
		t.Errorf("%d duplicates without any fault", dups)
	}

	// Idle outbox, other tables written on the primary.
	slotAt := func() (confirmed, restart uint64) {
		var cf, rl string
		_ = s.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, restart_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, f.slot).Scan(&cf, &rl)
		return lsn(t, cf), lsn(t, rl)
	}
	_, restart0 := slotAt()
	if _, err := p.Exec(ctx, "CREATE TABLE other_wal (x int); INSERT INTO other_wal SELECT generate_series(1, 10000)"); err != nil {
		t.Fatal(err)
	}
	var target string
	_ = p.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&target)
	testenv.Eventually(t, 30*time.Second, "the standby's slot to confirm past the primary's WAL of other tables", func() bool {
		cf, _ := slotAt()
		return cf >= lsn(t, target)
	})
	// The bgwriter logs a running-transactions record within 15 s of WAL activity.
	testenv.Eventually(t, 45*time.Second, "the standby's slot restart_lsn to move", func() bool {
		_, rl := slotAt()
		return rl > restart0
	})
	status, code := f.cli(t, "slot", "status", "--pg-url", c.standby.URL(db), "--slot", f.slot)
	if code != 0 || !strings.Contains(status, "standby (in recovery)") || !strings.Contains(status, "the replay position") {
		t.Errorf("slot status on the standby: exit %d\n%s", code, status)
	}
	if code := r.Stop(t); code != 0 {
		t.Errorf("relay exit %d after SIGTERM, want 0\n%s", code, r.Output())
	}
}

func lsn(t *testing.T, s string) uint64 {
	t.Helper()
	l, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatalf("LSN %q: %v", s, err)
	}
	return uint64(l)
}
