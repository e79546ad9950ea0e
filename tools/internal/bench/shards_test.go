package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseShardCounts(t *testing.T) {
	got, err := ParseShardCounts("1, 2,4,0")
	if err != nil || !slices.Equal(got, []int{1, 2, 4, 0}) {
		t.Errorf("1, 2,4,0: %v, %v", got, err)
	}
	for in, want := range map[string]string{
		"1,65": `shard count "65": want a number from 1 to 64`,
		"-1":   `shard count "-1"`,
		"two":  `shard count "two"`,
		"2,2":  "shard count 2 given twice",
		"":     `shard count ""`,
	} {
		if _, err := ParseShardCounts(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// The median drain, relay CPU and each walsender's CPU over the runs; no walsender figures when
// a run did not see every walsender.
func TestSummarizeShards(t *testing.T) {
	runs := []shardRun{
		{elapsed: 3 * time.Second, relayCPU: 2 * time.Second, walCPU: []time.Duration{1 * time.Second, 5 * time.Second}, walOK: true},
		{elapsed: 1 * time.Second, relayCPU: 4 * time.Second, walCPU: []time.Duration{2 * time.Second, 6 * time.Second}, walOK: true},
		{elapsed: 2 * time.Second, relayCPU: 3 * time.Second, walCPU: []time.Duration{3 * time.Second, 4 * time.Second}, walOK: true},
	}
	r := summarizeShards(2, 10_000, runs)
	if r.Elapsed != 2*time.Second || r.Rate != 5000 || r.RelayCPU != 3*time.Second ||
		!slices.Equal(r.WalsenderCPU, []time.Duration{2 * time.Second, 5 * time.Second}) || len(r.Runs) != 3 {
		t.Errorf("%+v", r)
	}
	runs[1].walOK = false
	if r := summarizeShards(2, 10_000, runs); r.WalsenderCPU != nil {
		t.Errorf("a run without its walsenders: %v", r.WalsenderCPU)
	}
}

// The tables: each shard count's rate against 1 shard's, each walsender's and all of them
// together per 10,000 rows of the backlog, the relays' CPU; then the filter cases against no
// filter.
func TestShardsMarkdown(t *testing.T) {
	d := func(c time.Duration) *time.Duration { return &c }
	r := &ShardsReport{Rows: 100_000, TxSize: 1, Repeats: 3, Drains: []ShardsResult{
		{Shards: 1, Rows: 100_000, Elapsed: 4 * time.Second, Rate: 25_000, WalsenderCPU: []time.Duration{3 * time.Second}, RelayCPU: 2 * time.Second},
		{Shards: 2, Rows: 100_000, Elapsed: 5 * time.Second, Rate: 20_000, WalsenderCPU: []time.Duration{3 * time.Second, 4 * time.Second}, RelayCPU: 3 * time.Second},
		{Shards: 0, Rows: 100_000, Elapsed: 4 * time.Second, Rate: 25_000, RelayCPU: 2 * time.Second},
	}, Filter: []FilterResult{
		{Case: FilterNone, Rows: 100_000, Elapsed: time.Second, WalsenderCPU: d(2 * time.Second)},
		{Case: FilterSkip, Rows: 100_000, Elapsed: time.Second, WalsenderCPU: d(time.Second)},
		{Case: FilterPass, Rows: 100_000, Elapsed: time.Second},
	}}
	got := r.Markdown()
	wantAll(t, "table", got,
		"### Shards: 100000 rows in 1-row transactions, median of 3 drains",
		"| 1 | 4.00 | 25000 | 1.00× | 0.300 | 0.300 | 0.200 | – |",
		"| 2 | 5.00 | 20000 | 0.80× | 0.300, 0.400 | 0.700 | 0.300 | – |",
		"| unsharded | 4.00 | 25000 | 1.00× | – | – | 0.200 | – |",
		"| no filter | 1.00 | 0.200 | 1.00× | – |",
		"| filter, every row skipped | 1.00 | 0.100 | 0.50× | – |",
		"| filter, every row sent | 1.00 | – | – | – |",
	)
	if strings.Contains(got, "busy before") {
		t.Errorf("a quiet machine flagged:\n%s", got)
	}
	r.Before = &MachineState{Busy: true, Why: "other processes used 0.50 cores (≥ 0.2)"}
	if got := r.Markdown(); !strings.Contains(got, "**The machine was busy before the run** (other processes used 0.50 cores") {
		t.Errorf("busy before:\n%s", got)
	}
}

func TestShardsConfigValidate(t *testing.T) {
	ok := ShardsConfig{Config: Config{PGURL: "postgres://x", Brokers: []string{"k:9092"}, OutDir: t.TempDir()}, FilterRows: -1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	wantInvalid(t, map[string]ShardsConfig{
		"must be > 0":         {Config: ok.Config, Rows: -1, FilterRows: -1},
		"65 shards":           {Config: ok.Config, Shards: []int{1, 65}, FilterRows: -1},
		"2 shards given":      {Config: ok.Config, Shards: []int{2, 2}, FilterRows: -1},
		"pg_recvlogical":      {Config: Config{PGURL: "postgres://x", Brokers: []string{"k"}, OutDir: "o", PGBin: "/nonexistent"}},
		"no output directory": {Config: Config{PGURL: "postgres://x", Brokers: []string{"k"}}, FilterRows: -1},
	})
}

// Every shard count drains the whole backlog to Kafka (a drain that published fewer, or
// a shard relay that failed, times out or fails the run), each walsender and the relays
// measured; the filter cases stream to the backlog's end with their walsenders measured, and
// the walsender that skips every row is measured as well. Nothing of the run is left.
func TestRunShards(t *testing.T) {
	ctx := needServices(t, 5*time.Minute)
	// The filter's backlog is larger: a walsender that skips 2,000 rows is done within one
	// sample of its CPU (every 50 ms, in ticks of 10 ms).
	sc := ShardsConfig{Rows: 2000, FilterRows: 20_000, Repeats: 1, Shards: []int{1, 2, 0},
		Config: Config{OutDir: t.TempDir(), Progress: testWriter{t}, DrainTimeout: time.Minute}}
	rep, err := RunShards(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	var counts []int
	for _, d := range rep.Drains {
		counts = append(counts, d.Shards)
		want := max(d.Shards, 1)
		if d.Rows != 2000 || len(d.Runs) != 1 || d.Rate <= 0 || d.RelayCPU <= 0 || d.Machine == nil || len(d.WalsenderCPU) != want {
			t.Errorf("%d shards: %+v", d.Shards, d)
		}
		for i, c := range d.WalsenderCPU {
			if c <= 0 {
				t.Errorf("%d shards: walsender %d used no CPU", d.Shards, i)
			}
		}
	}
	if !slices.Equal(counts, []int{1, 2, 0}) {
		t.Errorf("shard counts %v", counts)
	}
	var cases []string
	for _, f := range rep.Filter {
		cases = append(cases, f.Case)
		if f.Rows != 20_000 || f.Elapsed <= 0 || f.WalsenderCPU == nil || *f.WalsenderCPU <= 0 {
			t.Errorf("%s: %+v", f.Case, f)
		}
	}
	if !slices.Equal(cases, FilterCases) {
		t.Errorf("filter cases %q, want %q", cases, FilterCases)
	}
	md := rep.Markdown()
	if strings.Count(md, "\n| ") < 8 {
		t.Errorf("tables:\n%s", md)
	}
	t.Logf("\n%s", md)
	e := testEnv(ctx, t)
	// More shards than the server has slots for is refused before anything is made.
	if err := e.freeSlots(ctx, 10_000); err == nil || !strings.Contains(err.Error(), "raise max_replication_slots") {
		t.Errorf("10,000 slots: %v", err)
	}
	wantNothingLeft(ctx, t, e, rep.Prefix)
}
