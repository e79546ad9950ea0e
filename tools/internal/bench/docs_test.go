package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func docsReport(busy bool) *Report {
	quiet := &MachineState{Seconds: 10, LoadMin: 0.5, LoadMax: 1.2, OthersCores: 0.02}
	m := quiet
	if busy {
		m = &MachineState{Seconds: 10, LoadMin: 6, LoadMax: 9, OthersCores: 1.3, Busy: true, Why: "other processes used 1.30 cores (≥ 0.2)", Top: []string{"compile 0.90 cores"}}
	}
	return &Report{Started: time.Now(), Machine: "2 CPUs", Command: "cdc-bench", LoadAvg: [2]float64{0.5, 1.2},
		Config: ReportConfig{Rates: []int{2000}},
		Steady: []SteadyResult{
			{Publisher: "run", Rate: 2000, Achieved: 2000, P50: time.Millisecond, P99: 10 * time.Millisecond, CPU: time.Second, Events: 20000, PeakRSS: 20 << 20, Machine: quiet},
			{Publisher: "debezium tuned", Rate: 2000, Achieved: 2000, P50: 8 * time.Millisecond, P99: 20 * time.Millisecond, CPU: 4 * time.Second, Events: 20000, PeakRSS: 1 << 30, Machine: m},
			{Publisher: RawProducer, Rate: 2000, Achieved: 2000, P50: 300 * time.Microsecond, P99: 4 * time.Millisecond, CPU: 1400 * time.Millisecond, Events: 20000, Machine: quiet},
		},
		Backlog: []BacklogResult{
			{Publisher: RecvLogical, TxSize: 1, Rows: 1000, Rate: 100_000, Machine: quiet},
			{Publisher: "run", TxSize: 1, Rows: 1000, Rate: 90_000, Machine: quiet},
		},
	}
}

// The published tables are rewritten from a report between their markers, with each
// figure's ratio to run's; a run with a busy phase is refused unless allowed.
func TestUpdateDocs(t *testing.T) {
	dir := t.TempDir()
	readme, bench := filepath.Join(dir, "README.md"), filepath.Join(dir, "docs", "benchmark.md")
	if err := os.MkdirAll(filepath.Dir(bench), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, readme, []byte("# x\nbefore\n<!-- cdc-bench:summary begin -->\nold summary\n<!-- cdc-bench:summary end -->\nafter\n"))
	writeFile(t, bench, []byte("# b\n<!-- cdc-bench:tables begin -->\nold table\n<!-- cdc-bench:tables end -->\nkept\n"))

	err := UpdateDocs(docsReport(true), "results/R/table.md", false, readme, bench)
	if !errors.Is(err, ErrBusyRun) || !strings.Contains(err.Error(), "steady debezium tuned at 2000 rows/s") {
		t.Fatalf("busy run: %v, want ErrBusyRun naming the phase", err)
	}
	if b, _ := os.ReadFile(bench); !strings.Contains(string(b), "old table") {
		t.Fatal("a refused run changed the docs")
	}
	if err := UpdateDocs(docsReport(false), "results/R/table.md", false, readme, bench); err != nil {
		t.Fatal(err)
	}
	r, _ := os.ReadFile(readme)
	b, _ := os.ReadFile(bench)
	wantAll(t, "README", string(r), "before\n<!-- cdc-bench:summary begin -->\n- Commit to consumer at 2,000 rows/s: `run` p50 1.0 ms, p99 10.0 ms; debezium tuned 8.0 / 20.0 ms (8.00× / 2.00× run's)",
		"(results/R/table.md)", "<!-- cdc-bench:summary end -->\nafter\n")
	// The raw producer is no publisher's column: its figures are in the rows' labels.
	wantAll(t, "docs/benchmark.md", string(b), "| | run | debezium tuned |\n",
		"| p50 / p99 ms at 2,000 rows/s; kafka producer alone, produce to acknowledgement 0.3 / 4.0 | 1.0 / 10.0 | 8.0 / 20.0 (8.00× / 2.00×) |",
		"| CPU s per 10,000 events at 2,000 rows/s; kafka producer alone 0.70 | 0.50 | 2.00 (4.00×) |", "(0.90×)", "No phase ran on a busy machine",
		"(../results/R/table.md)", "<!-- cdc-bench:tables end -->\nkept\n")
	if strings.Contains(string(r)+string(b), "old ") {
		t.Error("the old sections are still there")
	}
	// Allowed, a busy run says so in the table.
	if err := UpdateDocs(docsReport(true), "results/R/table.md", true, bench); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(bench); !strings.Contains(string(b), "**One phase ran on a busy machine**") || !strings.Contains(string(b), " **busy** |") {
		t.Errorf("busy run published without its flag:\n%s", b)
	}
	if err := UpdateDocs(docsReport(false), "results/R/table.md", false, filepath.Join(dir, "README.md"), filepath.Join(dir, "none.md")); err == nil {
		t.Error("a missing file: no error")
	}
}

// The steady table flags a busy phase in its machine column and says above the tables which
// phases ran on a busy machine.
func TestMarkdownFlagsBusyPhases(t *testing.T) {
	md := docsReport(true).Markdown()
	wantAll(t, "table.md", md, "**1 of 5 phases ran on a busy machine; do not publish their absolute figures:**",
		"- steady debezium tuned at 2000 rows/s: other processes used 1.30 cores (≥ 0.2) (compile 0.90 cores)",
		"| **busy**: others 1.30 cores, steal 0 %, load 6.0–9.0 |", "| 8.00× / 2.00× |")
	if md := docsReport(false).Markdown(); !strings.Contains(md, "No phase ran on a busy machine.") {
		t.Errorf("quiet run:\n%s", md)
	}
}

func writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
