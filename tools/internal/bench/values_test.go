package bench

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

func TestParseCodecs(t *testing.T) {
	got, err := ParseCodecs("none, snappy,lz4,zstd:1,gzip:9")
	if err != nil || strings.Join(got, ",") != "none,snappy,lz4,zstd:1,gzip:9" {
		t.Fatalf("ParseCodecs = %v, %v", got, err)
	}
	for in, want := range map[string]string{
		"brotli":      `codec "brotli": want none, snappy, lz4, zstd or gzip`,
		"zstd:x":      `codec "zstd:x": a level is a number`,
		"snappy:1":    `codec "snappy:1": a level is a number, and only lz4, zstd and gzip take one`,
		"none,none":   `codec "none" given twice`,
		"none,":       `codec "": want none`,
		"zstd:1,zstd": "", // different settings
	} {
		_, err := ParseCodecs(in)
		if want == "" {
			if err != nil {
				t.Errorf("ParseCodecs(%q): %v", in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCodecs(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

func TestValuesMarkdownTargets(t *testing.T) {
	rep := &ValuesReport{
		Formats: []FormatResult{
			{Format: "json", Rows: 1000, DrainRate: 10000, CPUPer10k: 1.0, Rate: 2000, P99: 10 * time.Millisecond, SteadyCPUPer10k: 2},
			{Format: "avro", Rows: 1000, DrainRate: 9000, CPUPer10k: 1.2, Rate: 2000, P99: 10*time.Millisecond + 1500*time.Microsecond},
			{Format: "protobuf", Rows: 1000, DrainRate: 8000, CPUPer10k: 1.5, Rate: 2000, P99: 11 * time.Millisecond, Machine: &MachineState{Seconds: 1, Busy: true}},
		},
		Codecs: []CodecResult{
			{Codec: "none", Rows: 100, PayloadBytes: 10300, DrainRate: 1000, CPUPer10k: 2, BytesPerRow: 10500},
			{Codec: "lz4", Rows: 100, PayloadBytes: 10300, DrainRate: 920, CPUPer10k: 2.5, BytesPerRow: 2400},
			{Codec: "zstd:1", Rows: 100, PayloadBytes: 10300, DrainRate: 950, CPUPer10k: 3, BytesPerRow: 5000},
			{Codec: "gzip", Rows: 100, PayloadBytes: 10300, DrainRate: 800, CPUPer10k: 6, BytesPerRow: 6000},
		},
	}
	if cpuOK, p99OK, ok := rep.AvroTarget(); !ok || !cpuOK || p99OK {
		t.Errorf("AvroTarget = cpu %v p99 %v measured %v, want CPU met (1.2 ≤ 1.3) and p99 missed (+1.5 ms)", cpuOK, p99OK, ok)
	}
	md := rep.Markdown()
	wantAll(t, "table", md,
		"### Value formats (1000-row drains, steady 2000 rows/s)",
		"| json | 10000 | 1.00× | 1.000 | 1.00× | 10.0 ms | – | 2.000 | – |",
		"| avro | 9000 | 0.90× | 1.200 | 1.20× | 11.5 ms | +1.5 ms | 0.000 | CPU ≤ 1.3× json: yes; p99 ≤ json + 1ms: **no** |",
		"| protobuf | 8000 | 0.80× | 1.500 | 1.50× | 11.0 ms | +1.0 ms | 0.000 | – | **busy**",
		"### Codecs (100-row drains, JSON payloads of 10300 bytes)",
		"| none | 1000 | 1.00× | 2.000 | 10500 | 1.00× | – |",
		"| lz4 (default) | 920 | 0.92× | 2.500 | 2400 | 0.23× | bytes yes, drain yes |",
		"| zstd:1 | 950 | 0.95× | 3.000 | 5000 | 0.48× | bytes yes, drain yes |",
		"| gzip | 800 | 0.80× | 6.000 | 6000 | 0.57× | bytes **no**, drain **no** |",
		"**The machine was busy** during protobuf",
	)
}

// The values command, shrunk, against the real PostgreSQL, Kafka and schema registry: every
// format and codec has plausible figures, compression stores fewer bytes, and nothing the
// run made is left behind.
func TestValuesSuite(t *testing.T) {
	ctx := needServices(t, 8*time.Minute)
	registry := testenv.RegistryURL(t)
	vc := ValuesConfig{RegistryURL: registry, Rows: 500, CodecRows: 50, Rate: 500, Duration: time.Second, Repeats: 1,
		Codecs: []string{"none", "zstd:1"}}
	vc.OutDir, vc.Progress, vc.Warmup, vc.DrainTimeout = t.TempDir(), testWriter{t}, 200*time.Millisecond, 3*time.Minute
	rep, err := RunValues(ctx, vc)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Formats) != len(ValueFormats) || len(rep.Codecs) != 2 {
		t.Fatalf("%d format and %d codec results, want %d and 2", len(rep.Formats), len(rep.Codecs), len(ValueFormats))
	}
	for _, f := range rep.Formats {
		if f.DrainRate <= 0 || f.CPUPer10k <= 0 || f.P99 <= 0 || f.P99 > time.Minute || f.SteadyCPUPer10k <= 0 || len(f.Drains) != 1 || len(f.P99Runs) != 1 {
			t.Errorf("%s: implausible %+v", f.Format, f)
		}
	}
	none, zstd := rep.Codecs[0], rep.Codecs[1]
	// The documents are about --payload bytes; what Kafka stores uncompressed is more.
	if none.PayloadBytes < 0.9*10_240 || none.PayloadBytes > 1.1*10_240 || none.BytesPerRow < none.PayloadBytes || none.DrainRate <= 0 || none.CPUPer10k <= 0 {
		t.Errorf("none: implausible %+v", none)
	}
	if zstd.BytesPerRow <= 0 || zstd.BytesPerRow >= 0.9*none.BytesPerRow {
		t.Errorf("zstd:1 stored %.0f bytes per row, none %.0f: compression made no difference", zstd.BytesPerRow, none.BytesPerRow)
	}
	md, err := os.ReadFile(vc.OutDir + "/values.md")
	if err != nil || !strings.Contains(string(md), "| avro |") {
		t.Errorf("values.md: %v\n%s", err, md)
	}

	// Cleaned up: tables, slots, publications, topics and subjects.
	wantNothingLeft(ctx, t, testEnv(ctx, t), rep.Prefix)
	resp, err := http.Get(strings.TrimRight(registry, "/") + "/subjects?deleted=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var subjects []string
	if err := json.NewDecoder(resp.Body).Decode(&subjects); err != nil {
		t.Fatal(err)
	}
	for _, s := range subjects {
		if strings.HasPrefix(s, rep.Prefix) {
			t.Errorf("left behind subject %s", s)
		}
	}
}
