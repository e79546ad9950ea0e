package main

import (
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/tools/internal/bench"
)

// values is `cdc-bench values`: json, avro and protobuf values side by side, and the
// --compression codecs on 10 KB payloads, in one run (bench.RunValues).
func values(args []string, stdout, stderr io.Writer) int {
	vc, code := parseValues(args, stderr)
	return runReport(code, "values", vc.OutDir, stdout, stderr, func(ctx context.Context) (*bench.ValuesReport, error) {
		return bench.RunValues(ctx, vc)
	})
}

// parseValues parses values' flags; code is -1 to go on, else the exit code (2: bad usage).
func parseValues(args []string, stderr io.Writer) (vc bench.ValuesConfig, code int) {
	var codecs string
	s := newSubcommand("values", "", &vc.PGURL, &vc.RelayBin, stderr)
	s.fs.StringVar(&vc.RegistryURL, "registry-url", os.Getenv("CDC_RELAY_REGISTRY_URL"), "schema registry, Confluent API (default $CDC_RELAY_REGISTRY_URL)")
	s.fs.IntVar(&vc.Rows, "rows", 20_000, "rows of each value-format drain")
	s.fs.IntVar(&vc.CodecRows, "codec-rows", 2_000, "rows of each codec drain")
	s.fs.IntVar(&vc.Payload, "payload", 10_240, "payload bytes per row of the codec drains")
	s.fs.BoolVar(&vc.RandomPayload, "random-payload", false, "pad the codec drains' payloads with random hex as the backlog phase does (at most 2x compressible) instead of order documents of line items")
	s.fs.IntVar(&vc.Rate, "rate", 2000, "steady rate of each value format, rows per second (its p99 is reported)")
	s.fs.DurationVar(&vc.Duration, "duration", 15*time.Second, "how long each value format's steady rate is held (after --warmup)")
	s.fs.DurationVar(&vc.Warmup, "warmup", 2*time.Second, "load written at the steady rate before the measured part")
	s.fs.IntVar(&vc.Repeats, "repeats", 3, "drains and steady runs of each format and codec, interleaved; the tables show the medians")
	s.fs.StringVar(&codecs, "codecs", strings.Join(bench.DefaultCodecs, ","), "--compression settings compared, comma-separated, the first the baseline")
	s.fs.IntVar(&vc.Writers, "writers", 8, "connections writing the steady load")
	s.fs.IntVar(&vc.Partitions, "partitions", 3, "partitions per benchmark topic")
	s.fs.DurationVar(&vc.DrainTimeout, "drain-timeout", 2*time.Minute, "how long to wait for the last records of a phase")
	s.parse(args)
	if s.ok() && (vc.Rows <= 0 || vc.CodecRows <= 0 || vc.Payload <= 0 || vc.Rate <= 0 || vc.Duration <= 0 || vc.Repeats <= 0) {
		s.fail("--rows, --codec-rows, --payload, --rate, --duration and --repeats must be > 0")
	}
	if s.ok() {
		var err error
		if vc.Codecs, err = bench.ParseCodecs(codecs); err != nil {
			s.fail("--codecs: %v", err)
		}
	}
	vc.Command, vc.Progress = s.command(args), stderr
	s.finish(&vc.Brokers, &vc.OutDir)
	s.check(vc.Validate)
	return vc, s.code
}
