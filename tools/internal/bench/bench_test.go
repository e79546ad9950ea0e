package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
// number is plausible. It fails, never skips, when the services are missing.
func TestQuickSuite(t *testing.T) {
	if os.Getenv("CDC_RELAY_PG_URL") == "" || os.Getenv("CDC_RELAY_BROKERS") == "" {
		t.Fatal(`CDC_RELAY_PG_URL and CDC_RELAY_BROKERS must be set: run: eval "$(scripts/dev-up.sh)"`)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := t.TempDir()
	cfg := Config{
		Duration: 1500 * time.Millisecond, Rates: []int{200, 2000}, Backlog: 2000, TxSizes: []int{1, 100}, Repeats: 1,
		OutDir: out, Progress: testWriter{t}, DrainTimeout: time.Minute,
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}

	if got, want := len(rep.Steady), len(cfg.Rates)*len(DefaultPublishers); got != want {
		t.Fatalf("%d steady results, want %d", got, want)
	}
	for _, s := range rep.Steady {
		name := fmt.Sprintf("%s at %d rows/s", s.Publisher, s.Rate)
		// Other tests share the machine: the writers may fall behind, never ahead.
		wantRecords := int(float64(s.Rate) * cfg.Duration.Seconds())
		if s.Records < wantRecords/3 || s.Records > wantRecords {
			t.Errorf("%s: %d records, want at most %d and not far fewer", name, s.Records, wantRecords)
		}
		if s.Achieved < float64(s.Rate)/3 || s.Achieved > float64(s.Rate)*1.1 {
			t.Errorf("%s: achieved %.0f rows/s", name, s.Achieved)
		}
		if !(0 < s.P50 && s.P50 <= s.P90 && s.P90 <= s.P99 && s.P99 <= s.Max && s.Max < 30*time.Second) {
			t.Errorf("%s: implausible latencies p50 %s p90 %s p99 %s max %s", name, s.P50, s.P90, s.P99, s.Max)
		}
		if s.PeakRSS < 1<<20 || s.PeakRSS > 1<<30 || s.CPU <= 0 || s.Events < int64(s.Records) {
			t.Errorf("%s: RSS %d, CPU %s, events %d", name, s.PeakRSS, s.CPU, s.Events)
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

	if got, want := len(rep.Backlog), len(cfg.TxSizes)*(len(DefaultPublishers)+1); got != want {
		t.Fatalf("%d backlog results, want %d", got, want)
	}
	// The walsender's CPU is measured when this machine sees Postgres's processes (the
	// services of scripts/dev-up.sh run here), and never for poll.
	local := procVisible(ctx, t, cfg)
	measured := 0 // slot drains with a walsender CPU: a drain of a few ms can end before its walsender is seen
	for _, b := range rep.Backlog {
		if b.Rows != cfg.Backlog || b.Elapsed <= 0 || b.Elapsed > time.Minute || b.Rate <= 0 || len(b.Runs) != 1 {
			t.Errorf("backlog %d-row tx, %s: %+v", b.TxSize, b.Publisher, b)
		}
		poll := strings.HasPrefix(b.Publisher, "poll")
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
	}
	if local && measured == 0 {
		t.Error("no slot drain has a walsender CPU, though Postgres runs on this machine")
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
		if row := fmt.Sprintf("| %d | %s |", b.TxSize, b.Publisher); !strings.Contains(table, row) {
			t.Errorf("table.md has no row %q", row)
		}
	}
	for _, tg := range []string{"p50 ≤ 5 ms", "p99 ≤ 25 ms", "10× lower", "≥ 0.7 × pg_recvlogical", "≥ 2 × best poll", "RSS ≤ 64 MB"} {
		if !strings.Contains(table, tg) {
			t.Errorf("table.md has no target %q", tg)
		}
	}
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
	t.Logf("\n%s", table)
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

func TestParseProcStat(t *testing.T) {
	// comm may hold spaces and parentheses; utime 1234, stime 66, starttime 987654.
	line := "4242 (odd) name)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 66 0 0 20 0 1 0 987654 224000000 2000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n"
	st, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.comm != "odd) name)" || st.cpu != 13*time.Second || st.start != 987654 {
		t.Errorf("%+v", st)
	}
	for _, bad := range []string{"", "4242 odd S 1", "4242 (x) S 1 2 3"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if st, err := readProcStat(os.Getpid()); err != nil || st.start == 0 {
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
		{TxSize: 1, Rows: 20_000, Publisher: RecvLogical, Elapsed: time.Second, Rate: 20_000, WalsenderCPU: &wal},
		{TxSize: 1, Rows: 20_000, Publisher: "poll 10ms", Elapsed: 4 * time.Second, Rate: 5_000, CPU: 2 * time.Second},
	}}
	md := rep.Markdown()
	for _, row := range []string{
		"| 1 | pg_recvlogical | 1.00 | 20000 | 1.00× | – | 0.0 | 0.000 | 0.400 | 80% |",
		"| 1 | poll 10ms | 4.00 | 5000 | 0.25× | – | 0.0 | 1.000 | – | – |",
		"walsender CPU s / 10k events | walsender busy |",
		"near 100% busy is the limit of one slot; poll has no walsender",
	} {
		if !strings.Contains(md, row) {
			t.Errorf("table has no %q:\n%s", row, md)
		}
	}
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
