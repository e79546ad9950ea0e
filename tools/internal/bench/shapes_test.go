package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The partitioned shape's ranges cover every id, MINVALUE to MAXVALUE, in parts of about
// equal size, each starting where the previous ends.
func TestPartitionBounds(t *testing.T) {
	got := partitionBounds(100_000, 4)
	want := []partitionBound{{0, "MINVALUE", "25001"}, {1, "25001", "50001"}, {2, "50001", "75001"}, {3, "75001", "MAXVALUE"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := partitionBounds(10, 1); !slices.Equal(got, []partitionBound{{0, "MINVALUE", "MAXVALUE"}}) {
		t.Errorf("one part: %v", got)
	}
}

// The table gives each shape's median drain, its rate against plain's, the relay's CPU per
// 10,000 rows and the busy flag of the machine during its drains.
func TestShapesMarkdown(t *testing.T) {
	r := &ShapesResult{Rows: 100_000, Payload: 512, TxSize: 100, Repeats: 3, Shapes: []BacklogResult{
		{Publisher: ShapePlain, Rows: 100_000, Elapsed: 4 * time.Second, Rate: 25_000, CPU: 2 * time.Second, Machine: &MachineState{}},
		{Publisher: ShapeBytea, Rows: 100_000, Elapsed: 5 * time.Second, Rate: 20_000, CPU: 3 * time.Second,
			Machine: &MachineState{Busy: true, Why: "other processes used 0.50 cores (≥ 0.2)"}},
		{Publisher: ShapePartitioned, Rows: 100_000, Elapsed: 8 * time.Second, Rate: 12_500, CPU: 2500 * time.Millisecond},
	}}
	got := r.Markdown()
	wantAll(t, "table", got,
		"100000 rows of 512-byte payloads in 100-row transactions, median of 3 drains",
		"| shape | rows | median drain s | rows/s | × plain | relay CPU s / 10,000 rows | machine busy |",
		"| plain | 100000 | 4.00 | 25000 | 1.00 | 0.200 | no |",
		"| bytea | 100000 | 5.00 | 20000 | 0.80 | 0.300 | **yes**: other processes used 0.50 cores (≥ 0.2) |",
		"| partitioned | 100000 | 8.00 | 12500 | 0.50 | 0.250 | no |",
	)
	// Without plain, no ratio is made up.
	r.Shapes = r.Shapes[1:]
	if got := r.Markdown(); !strings.Contains(got, "| bytea | 100000 | 5.00 | 20000 | – |") {
		t.Errorf("without plain:\n%s", got)
	}
}

func TestShapesConfigValidate(t *testing.T) {
	ok := ShapesConfig{PGURL: "postgres://x", Brokers: []string{"k:9092"}, OutDir: t.TempDir()}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	wantInvalid(t, map[string]ShapesConfig{
		"no output directory": {PGURL: "postgres://x", Brokers: []string{"k"}},
		"must be positive":    {PGURL: "postgres://x", Brokers: []string{"k"}, OutDir: "o", Rows: -1},
		"one per partition":   {PGURL: "postgres://x", Brokers: []string{"k"}, OutDir: "o", Rows: 3},
	})
}

// Every shape's backlog is drained to the last row on Kafka (a drain that published fewer,
// say bad rows sent to the dead-letter topic, times out), once per repeat, with the relay's
// CPU measured; the table has a row per shape.
func TestRunShapes(t *testing.T) {
	ctx := needServices(t, 5*time.Minute)
	cfg := ShapesConfig{Rows: 1000, Payload: 300, TxSize: 10, Repeats: 2, OutDir: t.TempDir(), Progress: testWriter{t}}
	res, err := RunShapes(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Shapes {
		names = append(names, s.Publisher)
		if s.Rows != cfg.Rows || len(s.Runs) != cfg.Repeats || s.Elapsed <= 0 || s.Rate <= 0 || s.CPU <= 0 || s.Machine == nil {
			t.Errorf("%s: %+v", s.Publisher, s)
		}
	}
	if !slices.Equal(names, Shapes) {
		t.Errorf("shapes %q, want %q", names, Shapes)
	}
	if md := res.Markdown(); strings.Count(md, "| 1000 |") != 3 {
		t.Errorf("table:\n%s", md)
	}
	// Nothing of the run is left: its tables (and partitions), slots, publications and topics.
	e := testEnv(ctx, t)
	if res.Prefix == "" {
		t.Fatal("no prefix")
	}
	wantNothingLeft(ctx, t, e, res.Prefix)
}
