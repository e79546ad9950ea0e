package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The whole suite, shrunk, against the real services: every table row is there and every
// number is plausible. Without the services it fails under make test or CI (testenv.Require).
func TestQuickSuite(t *testing.T) {
	ctx := needServices(t, 12*time.Minute)
	out := t.TempDir()
	// Debezium as shipped only: each Debezium publisher costs two JVM starts (the replay
	// phase's cold start and restart), 20-30 s each on two busy cores.
	pubs := []Publisher{DefaultPublishers[0], DefaultPublishers[1], DefaultPublishers[2], DefaultPublishers[3], DebeziumPublishers[0]}
	cfg := Config{
		Duration: 1500 * time.Millisecond, Warmup: 500 * time.Millisecond, Rates: []int{200, 2000}, Backlog: 2000, TxSizes: []int{1, 100}, Repeats: 1,
		LargeRows: 200, ReplayRate: 500, KillAfter: 2 * time.Second, Publishers: pubs,
		OutDir: out, Progress: testWriter{t}, DrainTimeout: 3 * time.Minute,
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.LeftOut) > 0 {
		t.Fatalf("left out %v: the test machine needs java and mvn", rep.LeftOut)
	}

	// Every publisher at every rate, and the raw producer beside them.
	if got, want := len(rep.Steady), len(cfg.Rates)*(len(pubs)+1); got != want {
		t.Fatalf("%d steady results, want %d", got, want)
	}
	for _, s := range rep.Steady {
		name := fmt.Sprintf("%s at %d rows/s", s.Publisher, s.Rate)
		if s.Publisher == RawProducer {
			// In the benchmark's process, from memory: every record it was due to produce,
			// each acknowledged, at about the rate.
			want := int(float64(s.Rate) * cfg.Duration.Seconds())
			if s.Records != want || s.Events != int64(want) || len(s.Latencies) != want || s.CPU <= 0 ||
				!(0 < s.P50 && s.P50 <= s.P99 && s.P99 <= s.Max && s.Max < 30*time.Second) || s.Achieved < float64(s.Rate)/3 || s.Machine == nil {
				t.Errorf("%s: %d records, %d events, CPU %s, p50 %s p99 %s max %s, %.0f/s", name, s.Records, s.Events, s.CPU, s.P50, s.P99, s.Max, s.Achieved)
			}
			continue
		}
		// A JVM: Kafka Connect's heap may grow to 2 GB, its first seconds are slow, and on two
		// cores it takes CPU from the writers and Postgres (465 of 2,000 rows/s written with
		// Debezium at load average 6, where the others had 1,000).
		maxRSS, maxLat, slower := int64(1<<30), 30*time.Second, 3
		if s.Publisher == Debezium {
			maxRSS, maxLat, slower = 4<<30, 2*time.Minute, 10
		}
		// Other tests share the machine: the writers may fall behind, never ahead.
		wantRecords := int(float64(s.Rate) * cfg.Duration.Seconds())
		if s.Records < wantRecords/slower || s.Records > wantRecords {
			t.Errorf("%s: %d records, want at most %d and not far fewer", name, s.Records, wantRecords)
		}
		if s.Achieved < float64(s.Rate)/float64(slower) || s.Achieved > float64(s.Rate)*1.1 {
			t.Errorf("%s: achieved %.0f rows/s", name, s.Achieved)
		}
		if !(0 < s.P50 && s.P50 <= s.P90 && s.P90 <= s.P99 && s.P99 <= s.Max && s.Max < maxLat) {
			t.Errorf("%s: implausible latencies p50 %s p90 %s p99 %s max %s", name, s.P50, s.P90, s.P99, s.Max)
		}
		if s.PeakRSS < 1<<20 || s.PeakRSS > maxRSS || s.CPU <= 0 || s.Events < int64(s.Records) {
			t.Errorf("%s: RSS %d, CPU %s, events %d", name, s.PeakRSS, s.CPU, s.Events)
		}
		if s.Machine == nil || s.Machine.Seconds <= 0 {
			t.Errorf("%s: no machine state", name)
		}
		if len(s.Latencies) != s.Records {
			t.Errorf("%s: %d latencies for %d records", name, len(s.Latencies), s.Records)
		}
	}
	// A polling publisher at 100ms cannot beat its own interval by much: its median waits
	// for the next cycle, the relay's does not.
	run, _ := rep.steadyOf("run", 200)
	poll, _ := rep.steadyOf("poll 100ms", 200)
	if poll.P50 < 20*time.Millisecond || poll.P50 > 5*time.Second || run.P50 >= poll.P50 {
		t.Errorf("p50 run %s, poll 100ms %s: implausible", run.P50, poll.P50)
	}

	// Debezium's EventRouter cannot beat its poll.interval.ms (500 ms) at 200 rows/s, where a
	// batch of max.batch.size (2048) never fills: its median waits for the interval.
	if dbz, _ := rep.steadyOf(Debezium, 200); dbz.P50 <= run.P50 {
		t.Errorf("p50 run %s, debezium %s: implausible", run.P50, dbz.P50)
	}

	// Every tx size, and the large payloads, for every publisher, pg_recvlogical and the raw
	// producer.
	if got, want := len(rep.Backlog), (len(cfg.TxSizes)+1)*(len(pubs)+2); got != want {
		t.Fatalf("%d backlog results, want %d", got, want)
	}
	// The walsender's CPU is measured when this machine sees Postgres's processes (the
	// services of scripts/dev-up.sh run here), and never for poll.
	local := procVisible(ctx, t, cfg)
	measured := 0 // slot drains with a walsender CPU: a drain of a few ms can end before its walsender is seen
	var sawUsed, sawServer, sawBroker bool
	for _, b := range rep.Backlog {
		rows, payload := cfg.Backlog, 0
		if b.Payload > 0 {
			rows, payload = cfg.LargeRows, 10_240
		}
		if b.Rows != rows || b.Payload != payload || b.Elapsed <= 0 || b.Elapsed > 3*time.Minute || b.Rate <= 0 || len(b.Runs) != 1 {
			t.Errorf("backlog %s, %s: %+v", b.scenario(), b.Publisher, b)
		}
		// The value bytes are the payloads' JSON text: ~150 bytes, or the blob and the rest.
		if per := b.ValueBytes / int64(b.Rows); per < int64(payload)+100 || per > int64(payload)+300 || b.MBps <= 0 {
			t.Errorf("backlog %s, %s: %d value bytes per row, %.1f MB/s", b.scenario(), b.Publisher, per, b.MBps)
		}
		if b.Publisher != RecvLogical && (b.FirstRecord <= 0 || b.FirstRecord > b.Elapsed) || b.Machine == nil {
			t.Errorf("backlog %s, %s: first record after %s of %s", b.scenario(), b.Publisher, b.FirstRecord, b.Elapsed)
		}
		poll := strings.HasPrefix(b.Publisher, "poll") || b.Publisher == RawProducer
		switch w := b.WalsenderCPU; {
		case poll && w != nil:
			t.Errorf("backlog %d-row tx, %s: walsender CPU %s for a poller", b.TxSize, b.Publisher, *w)
		case w != nil && (*w < 0 || *w > b.Elapsed+2*clockTick):
			// One process cannot use more CPU than the drain's wall time (give or take a tick).
			t.Errorf("backlog %d-row tx, %s: walsender CPU %s in a %s drain", b.TxSize, b.Publisher, *w, b.Elapsed)
		}
		if w := b.WalsenderCPU; !poll && w != nil {
			measured++
		}
		// The machine's cores in the drain, and of them the server's (a walsender decodes
		// for every slot drain) and the broker's (every drain produces), when both run here:
		// seen in some drain (per-process CPU comes in 10 ms ticks, and a drain here may be
		// shorter than a few of them).
		if m := b.Machine; b.Publisher == "run" && m != nil {
			sawUsed = sawUsed || m.UsedCores > 0
			sawServer, sawBroker = sawServer || m.ServerCores > 0, sawBroker || m.BrokerCores > 0
		}
	}
	if local && !(sawUsed && sawServer && sawBroker) {
		t.Errorf("no drain of run shows the machine's cores used (%v), PostgreSQL's (%v) and Kafka's (%v)", sawUsed, sawServer, sawBroker)
	}
	if local && measured == 0 {
		t.Error("no slot drain has a walsender CPU, though Postgres runs on this machine")
	}

	// The kill -9: every slot publisher, nothing lost (replay fails otherwise), and
	// Debezium as shipped replays every record it had delivered: Connect stores its offset
	// (and Debezium then confirms the slot) every 60 s, and the kill came 2 s in.
	if got, want := len(rep.Replay), 3; got != want {
		t.Fatalf("%d replay results, want %d (run, run-eos, debezium)", got, want)
	}
	for _, x := range rep.Replay {
		if x.Rows < int(float64(cfg.ReplayRate)*cfg.KillAfter.Seconds()) || x.Startup <= 0 || x.Restart <= 0 || x.ReadBeforeKill <= 0 ||
			x.KilledAfter < cfg.KillAfter || x.Duplicates < 0 || x.PeakRSS <= 0 {
			t.Errorf("replay %s: %+v", x.Publisher, x)
		}
		// Exactly-once, read read_committed: the kill aborts what was open, nothing repeats.
		if x.Publisher == RunEOS && x.Duplicates != 0 {
			t.Errorf("run-eos: %d duplicates after a kill -9, read read_committed", x.Duplicates)
		}
		if x.Publisher == Debezium && x.Duplicates < x.ReadBeforeKill {
			t.Errorf("debezium replayed %d records after a kill with %d read and no offset stored", x.Duplicates, x.ReadBeforeKill)
		}
	}

	md, err := os.ReadFile(filepath.Join(out, "table.md"))
	if err != nil {
		t.Fatal(err)
	}
	table := string(md)
	for _, s := range rep.Steady {
		if row := fmt.Sprintf("| %s | %d |", s.Publisher, s.Rate); !strings.Contains(table, row) {
			t.Errorf("table.md has no row %q", row)
		}
	}
	for _, b := range rep.Backlog {
		if row := fmt.Sprintf("| %d | %s | %s |", b.TxSize, size(int(b.ValueBytes/int64(b.Rows))), b.Publisher); !strings.Contains(table, row) {
			t.Errorf("table.md has no row %q", row)
		}
	}
	for _, x := range rep.Replay {
		if row := fmt.Sprintf("| %s | %d | %d |", x.Publisher, x.Rate, x.Rows); !strings.Contains(table, row) {
			t.Errorf("table.md has no row %q", row)
		}
	}
	wantAll(t, "table.md", table, "p50 ≤ 5 ms", "p99 ≤ 25 ms", "10× lower", "≥ 0.7 × pg_recvlogical", "≥ 2 × best poll", "RSS ≤ 64 MB",
		"p99 ≤ 1/10 of debezium's", "run ≥ 3 × debezium's rate", "run ≥ 0.9 × min(pg_recvlogical, kafka producer)", "The machine column is what the machine did", "| kafka producer |", "1/10 of debezium's JVM", "duplicates ≤ 1/10 of debezium's", "- debezium: none (as shipped)",
		"run-eos at 2,000 rows/s: p99 ≤ run's p99 + 100ms", "backlog, 100-row transactions: run-eos ≥ 0.9 × run's rate")
	for _, f := range []string{"report.json", "latency-cdf.svg", "latency-cdf.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() < 100 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Nothing is left behind.
	e, err := newEnv(ctx, cfg.withDefaults(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	var slots, tables int
	if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE starts_with(slot_name, $1)),
		(SELECT count(*) FROM pg_tables WHERE starts_with(tablename, $1))`, rep.Prefix).Scan(&slots, &tables); err != nil {
		t.Fatal(err)
	}
	topics, err := e.adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, rep.Prefix) {
			left = append(left, name)
		}
	}
	if slots != 0 || tables != 0 || len(left) != 0 {
		t.Errorf("left behind: %d slots, %d tables, topics %v named %s*", slots, tables, left, rep.Prefix)
	}
	// Nor a Kafka Connect JVM.
	if jvms := connectJVMs(t, out); len(jvms) > 0 {
		t.Errorf("Kafka Connect still running: pids %v", jvms)
	}
	t.Logf("\n%s", table)
}

// connectJVMs returns the pids of processes whose command line names dir (the workers'
// properties files are under it).
func connectJVMs(t *testing.T, dir string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), dir) && strings.Contains(string(b), "ConnectStandalone") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procVisible reports whether this machine's /proc shows a Postgres backend of cfg's server
// under its pid: then the bench can read walsenders' CPU time.
func procVisible(ctx context.Context, t *testing.T, cfg Config) bool {
	t.Helper()
	e, err := newEnv(ctx, cfg.withDefaults(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	var pid int32
	if err := e.pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	st, err := readProcStat(int(pid))
	return err == nil && st.comm == "postgres"
}

func TestReadProcStat(t *testing.T) {
	if st, err := readProcStat(os.Getpid()); err != nil || st.start == 0 || st.comm == "" {
		t.Errorf("/proc/self/stat: %+v, %v", st, err)
	}
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.9: 90 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond, 0: time.Millisecond} {
		if got := quantile(d, q); got != want {
			t.Errorf("q%.2f = %s, want %s", q, got, want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("empty input")
	}
}

func TestSummarizeTakesTheMedian(t *testing.T) {
	r := summarize("run", 1, 1000, []drainRun{{elapsed: 3 * time.Second, rss: 10, cpu: 3}, {elapsed: time.Second, rss: 30, cpu: 1}, {elapsed: 2 * time.Second, rss: 20, cpu: 2}})
	if r.Elapsed != 2*time.Second || r.Rate != 500 || r.PeakRSS != 30 || r.CPU != 2 || len(r.Runs) != 3 || r.Runs[0] != 3*time.Second {
		t.Errorf("%+v", r)
	}
}

func TestSummarizeWalsenderCPU(t *testing.T) {
	// The median of the drains that measured it; none measured, none reported.
	r := summarize(RecvLogical, 1, 1000, []drainRun{{elapsed: 1, walCPU: 5, walOK: true}, {elapsed: 1}, {elapsed: 1, walCPU: 7, walOK: true}, {elapsed: 1, walCPU: 6, walOK: true}})
	if r.WalsenderCPU == nil || *r.WalsenderCPU != 6 {
		t.Errorf("walsender CPU %v, want 6", r.WalsenderCPU)
	}
	if !slices.Equal(r.WalsenderRuns, []time.Duration{5, 0, 7, 6}) {
		t.Errorf("walsender runs %v, want [5 0 7 6]", r.WalsenderRuns)
	}
	if r := summarize("poll 10ms", 1, 1000, []drainRun{{elapsed: 1}}); r.WalsenderCPU != nil {
		t.Errorf("walsender CPU %v without a measurement", *r.WalsenderCPU)
	}
}

func TestBacklogTableWalsender(t *testing.T) {
	wal := 800 * time.Millisecond
	rep := &Report{Config: ReportConfig{Backlog: 20_000, Repeats: 1}, Backlog: []BacklogResult{
		{TxSize: 1, Rows: 20_000, Publisher: RecvLogical, Elapsed: time.Second, Rate: 20_000, WalsenderCPU: &wal, ValueBytes: 3_000_000, MBps: 2.86},
		{TxSize: 1, Rows: 20_000, Publisher: "poll 10ms", Elapsed: 4 * time.Second, Rate: 5_000, CPU: 2 * time.Second, FirstRecord: 2 * time.Second, ValueBytes: 3_000_000, MBps: 0.72},
	}}
	md := rep.Markdown()
	wantAll(t, "table", md,
		"| 1 | 150 B | pg_recvlogical | 1.00 | 20000 | – | – | 2.9 | 1.00× | – | 0.0 | 0.000 | 0.400 | 80% |",
		"| 1 | 150 B | poll 10ms | 4.00 | 5000 | 2.00 | 10000 | 0.7 | 0.25× | – | 0.0 | 1.000 | – | – |",
		"walsender CPU s / 10k events | walsender busy |",
		"near 100% busy is the limit of one slot; poll has no walsender",
	)
}

// Walsender busy is per drain: the median of each drain's CPU ÷ its own time, every drain in
// brackets, a drain without a reading shown as such and left out of the median. (The median
// CPU over the median time, 1.0 s ÷ 3 s here, would say 33%.)
func TestBacklogTableWalsenderPerDrain(t *testing.T) {
	rep := &Report{Config: ReportConfig{Backlog: 20_000, Repeats: 4}, Backlog: []BacklogResult{
		summarize("run", 1, 20_000, []drainRun{
			{elapsed: 2 * time.Second, walCPU: 1000 * time.Millisecond, walOK: true}, // 50%
			{elapsed: 1 * time.Second, walCPU: 900 * time.Millisecond, walOK: true},  // 90%
			{elapsed: 3 * time.Second, walCPU: 2400 * time.Millisecond, walOK: true}, // 80%
			{elapsed: 4 * time.Second},
		}),
	}}
	md := rep.Markdown()
	if want := "| 80% (50, 90, 80, –) |"; !strings.Contains(md, want) {
		t.Errorf("table has no %q:\n%s", want, md)
	}
}

func TestTargets(t *testing.T) {
	rep := &Report{Config: ReportConfig{TxSizes: []int{1}}}
	rep.Steady = []SteadyResult{
		{Publisher: "run", Rate: 2000, P50: 2 * time.Millisecond, P99: 30 * time.Millisecond, PeakRSS: 30 << 20},
		{Publisher: "poll 100ms", Rate: 2000, P50: 55 * time.Millisecond},
	}
	rep.Backlog = []BacklogResult{
		{TxSize: 1, Publisher: RecvLogical, Rate: 100},
		{TxSize: 1, Publisher: "run", Rate: 80},
		{TxSize: 1, Publisher: "poll 100ms", Rate: 30},
		{TxSize: 1, Publisher: "poll 10ms", Rate: 45},
	}
	rep.evaluate()
	want := map[string]bool{
		"run at 2,000 rows/s: p50 ≤ 5 ms": true, "run at 2,000 rows/s: p99 ≤ 25 ms": false,
		"run at 2,000 rows/s: p50 ≥ 10× lower than poll 100ms":    true,
		"backlog, 1-row transactions: run ≥ 0.7 × pg_recvlogical": true,
		"backlog, 1-row transactions: run ≥ 2 × best poll":        false, // 80 / 45
		"run: peak RSS ≤ 64 MB during the steady runs":            true,
	}
	if len(rep.Targets) != len(want) {
		t.Fatalf("targets %+v", rep.Targets)
	}
	for _, tg := range rep.Targets {
		if met, ok := want[tg.Name]; !ok || met != tg.Met {
			t.Errorf("%s: met %v (%s)", tg.Name, tg.Met, tg.Measured)
		}
	}
}

// Issue 12's targets against Debezium as shipped: from the results present, large payloads
// compared with large payloads, the drain rate after the first record (start-up apart), the
// peak RSS of any phase, and Debezium tuned never the reference.
func TestTargetsDebezium(t *testing.T) {
	rep := &Report{}
	rep.Steady = []SteadyResult{
		{Publisher: "run", Rate: 2000, P99: 40 * time.Millisecond, PeakRSS: 30 << 20},
		{Publisher: Debezium, Rate: 2000, P99: 500 * time.Millisecond, PeakRSS: 600 << 20},
		{Publisher: "debezium tuned", Rate: 2000, P99: 50 * time.Millisecond, PeakRSS: 100 << 20},
	}
	rep.Backlog = []BacklogResult{
		{TxSize: 1, Rows: 1000, Publisher: "run", Elapsed: 2 * time.Second, FirstRecord: time.Second, Rate: 500, PeakRSS: 70 << 20},
		{TxSize: 1, Rows: 1000, Publisher: Debezium, Elapsed: 10 * time.Second, FirstRecord: 6 * time.Second, Rate: 100},
		{TxSize: 1, Rows: 100, Payload: 10_240, Publisher: "run", Elapsed: time.Second, Rate: 100},
		{TxSize: 1, Rows: 100, Payload: 10_240, Publisher: Debezium, Elapsed: 2 * time.Second, Rate: 50},
	}
	rep.Replay = []ReplayResult{{Publisher: "run", Duplicates: 60}, {Publisher: Debezium, Duplicates: 599}, {Publisher: "debezium tuned", Duplicates: 6000}}
	rep.evaluate()
	want := map[string]bool{
		"run at 2,000 rows/s: p99 ≤ 1/10 of debezium's":                          true,  // 40 vs 500 ms
		"backlog, 1-row transactions: run ≥ 3 × debezium's rate":                 true,  // 1000/1 s vs 1000/4 s
		"backlog, 1-row transactions, 10 KB payloads: run ≥ 3 × debezium's rate": false, // 2×
		"run: peak RSS ≤ 1/10 of debezium's JVM":                                 false, // 70 (backlog) vs 600 MB
		"kill -9: run's duplicates ≤ 1/10 of debezium's":                         false, // 60 vs 599
	}
	got := map[string]Target{}
	for _, tg := range rep.Targets {
		got[tg.Name] = tg
	}
	for name, met := range want {
		tg, ok := got[name]
		if !ok {
			t.Errorf("no target %q in %+v", name, rep.Targets)
			continue
		}
		if tg.Met != met {
			t.Errorf("%s: met %v (%s), want %v", name, tg.Met, tg.Measured, met)
		}
	}
	if m := got["backlog, 1-row transactions: run ≥ 3 × debezium's rate"].Measured; !strings.HasPrefix(m, "4.0× (1000 vs 250 rows/s after the first record; from the start 500 vs 100)") {
		t.Errorf("drain target measured %q", m)
	}
}

// The exactly-once targets: run-eos beside run at every steady rate (p99 within run's plus the
// transaction interval), within fixed bounds at 2,000 and 5,000 rows/s (whether run ran or not),
// and every backlog (0.9 × run's drain rate), and only where both ran.
func TestTargetsExactlyOnce(t *testing.T) {
	rep := &Report{Config: ReportConfig{Rates: []int{500, 2000, 5000}}}
	rep.Steady = []SteadyResult{
		{Publisher: "run", Rate: 500, P99: 10 * time.Millisecond}, {Publisher: RunEOS, Rate: 500, P99: 110 * time.Millisecond},
		{Publisher: "run", Rate: 2000, P99: 10 * time.Millisecond}, {Publisher: RunEOS, Rate: 2000, P99: 111 * time.Millisecond},
		{Publisher: RunEOS, Rate: 5000, P99: 40 * time.Millisecond}, // no run beside it
	}
	rep.Steady[3].P50 = 10 * time.Millisecond
	rep.Backlog = []BacklogResult{
		{TxSize: 1, Publisher: "run", Rate: 1000}, {TxSize: 1, Publisher: RunEOS, Rate: 900},
		{TxSize: 100, Publisher: "run", Rate: 1000}, {TxSize: 100, Publisher: RunEOS, Rate: 899},
	}
	rep.evaluate()
	want := map[string]bool{
		"run-eos at 500 rows/s: p99 ≤ run's p99 + 100ms":            true,
		"run-eos at 2,000 rows/s: p99 ≤ run's p99 + 100ms":          false,
		"run-eos at 2,000 rows/s: p50 ≤ 10 ms":                      true,
		"run-eos at 2,000 rows/s: p99 ≤ 30 ms":                      false,
		"run-eos at 5,000 rows/s: p99 ≤ 40 ms":                      true,
		"backlog, 1-row transactions: run-eos ≥ 0.9 × run's rate":   true,
		"backlog, 100-row transactions: run-eos ≥ 0.9 × run's rate": false,
	}
	got := map[string]Target{}
	for _, tg := range rep.Targets {
		if strings.Contains(tg.Name, RunEOS) {
			got[tg.Name] = tg
		}
	}
	if len(got) != len(want) {
		t.Errorf("targets %+v", rep.Targets)
	}
	for name, met := range want {
		if tg, ok := got[name]; !ok || tg.Met != met {
			t.Errorf("%s: %+v, want met %v", name, tg, met)
		}
	}
}

// Without a JVM the debezium publishers are left out, named with the reason, and the run
// goes on with the others.
func TestDebeziumLeftOutWithoutJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var progress strings.Builder
	cfg := Config{Publishers: DefaultPublishers, Progress: &progress}
	got, left := prepareDebezium(context.Background(), cfg)
	if len(got.Publishers) != len(DefaultPublishers)-2 || slices.ContainsFunc(got.Publishers, func(p Publisher) bool { return p.Debezium }) {
		t.Errorf("publishers kept: %+v", got.Publishers)
	}
	if len(left) != 2 || !strings.Contains(left[0], "debezium: java not found") || !strings.Contains(left[1], "debezium tuned: java not found") {
		t.Errorf("left out %q", left)
	}
	if !strings.Contains(progress.String(), "leaving out debezium: java not found: Debezium (Kafka Connect) needs Java 17") {
		t.Errorf("progress %q", progress.String())
	}
	md := (&Report{LeftOut: left}).Markdown()
	if !strings.Contains(md, "Left out of this run:\n\n- debezium: java not found") {
		t.Errorf("table:\n%s", md)
	}
}

// Without Maven (and no jars given) the same, naming Maven.
func TestDebeziumLeftOutWithoutMaven(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "java"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	cfg := Config{Publishers: []Publisher{{Name: "run"}, DebeziumPublishers[0]}, Progress: io.Discard}
	got, left := prepareDebezium(context.Background(), cfg)
	if len(got.Publishers) != 1 || len(left) != 1 || !strings.Contains(left[0], "mvn not found") {
		t.Errorf("kept %+v, left out %q", got.Publishers, left)
	}
}

// The connector's settings: the record contract as far as EventRouter allows, pgoutput, its
// own slot and filtered publication, no snapshot, the URL's sslmode; a publisher's settings
// go to the connector, worker.* ones not.
func TestConnectorConfig(t *testing.T) {
	f := &fixture{base: "bench_x_1", outbox: "public.bench_x_1", topic: "bench_x_1.events"}
	c, err := connectorConfig("postgres://relay:s3cret@db.example:5433/app?sslmode=verify-full", DebeziumPublishers[1], f, "slot_a", "")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"database.hostname": "db.example", "database.port": "5433", "database.user": "relay", "database.password": "s3cret",
		"database.dbname": "app", "database.sslmode": "verify-full", "plugin.name": "pgoutput", "slot.name": "slot_a",
		"publication.name": "bench_x_1", "publication.autocreate.mode": "filtered", "table.include.list": "public.bench_x_1",
		"snapshot.mode": "no_data", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.route.by.field": "topic", "transforms.outbox.route.topic.replacement": "${routedByValue}",
		"transforms.outbox.table.field.event.key": "aggregate_id", "transforms.outbox.table.field.event.payload": "payload",
		"transforms.outbox.table.fields.additional.placement": "id:header:outbox-id,created_at:header:cdc-commit-time",
		"poll.interval.ms": "10",
	} {
		if c[k] != v {
			t.Errorf("%s = %q, want %q", k, c[k], v)
		}
	}
	for k := range c {
		if strings.HasPrefix(k, "worker.") || k == "producer.linger.ms" || k == "offset.flush.interval.ms" {
			t.Errorf("worker setting %s in the connector", k)
		}
	}
	c, _ = connectorConfig("host=/tmp dbname=cdc sslmode=disable", DebeziumPublishers[0], f, "slot_b", "drain.topic")
	if c["database.sslmode"] != "disable" || c["transforms.outbox.route.topic.replacement"] != "drain.topic" || c["poll.interval.ms"] != "" {
		t.Errorf("%v", c)
	}
	if err := (Config{PGURL: "x", Brokers: []string{"b"}, OutDir: "o", SkipBacklog: true,
		Publishers: []Publisher{{Name: "d", Debezium: true, Args: []string{"poll.interval.ms"}}}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), `setting "poll.interval.ms": want key=value`) {
		t.Errorf("Validate: %v", err)
	}
}

// fakeJava is a stand-in for `java ... ConnectStandalone worker.properties`: it serves the
// REST calls the bench makes on the listeners port of the properties file (its last argument)
// until it is stopped.
const fakeJava = `#!/usr/bin/env python3
import sys, http.server
port = [l.split(":")[-1].strip() for l in open(sys.argv[-1]) if l.startswith("listeners=")][0]
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body=b"[]"):
        self.send_response(code); self.end_headers(); self.wfile.write(body)
    def do_GET(self): self.reply(200)
    def do_POST(self): self.reply(201, b"{}")
    def do_DELETE(self): self.reply(204, b"")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(port)), H).serve_forever()
`

// fakeWorkerEnv is a bench env whose java is fakeJava (a fake Kafka Connect worker, in python3)
// and whose publishers' logs go into logs.
func fakeWorkerEnv(t *testing.T, logs string) *env {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed for the fake Kafka Connect worker")
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "java"), []byte(fakeJava), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return &env{cfg: Config{Brokers: []string{"127.0.0.1:1"}, DebeziumHome: t.TempDir(), Progress: io.Discard}.withDefaults(),
		logDir: logs, workers: map[string]*connectWorker{}}
}

// A debezium publisher's worker outlives the phase that started it (a phase's cleanup once
// stopped it, so every later phase started another JVM, and the last one was never stopped)
// and stops with the run.
func TestWorkerOutlivesPhases(t *testing.T) {
	logs := t.TempDir()
	e := fakeWorkerEnv(t, logs)
	ctx := context.Background()
	pub := DebeziumPublishers[0]
	f := &fixture{base: "bench_t_1", outbox: "public.bench_t_1"}

	var first *proc
	for phase := 0; phase < 2; phase++ {
		m := e.mark()
		r, err := e.launch(ctx, pub, f, fmt.Sprintf("slot_%d", phase), "", "x")
		if err != nil {
			t.Fatal(err)
		}
		w := r.(*debeziumRun).w
		if phase == 0 {
			first = w.p
		} else if w.p != first {
			t.Errorf("phase 2 runs a new worker (pid %d; the first, pid %d, exited: %v)", w.p.PID(), first.PID(), first.Exited())
		}
		if err := r.finish(); err != nil {
			t.Fatal(err)
		}
		e.cleanupTo(m)
		if first.Exited() {
			t.Fatalf("phase %d's cleanup stopped the worker", phase+1)
		}
	}
	e.stopWorkers()
	if !first.Exited() {
		first.Kill()
		t.Error("the worker still runs after the run's end")
	}
}
