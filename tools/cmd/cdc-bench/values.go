package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/tools/internal/bench"
)

// values is `cdc-bench values`: json, avro and protobuf values side by side, and the
// --compression codecs on 10 KB payloads, in one run (bench.RunValues).
func values(args []string, stdout, stderr io.Writer) int {
	vc, code := parseValues(args, stderr)
	if code >= 0 {
		return code
	}
	vc.Progress = stderr
	return runReport("values", vc.OutDir, stdout, stderr, func(ctx context.Context) (string, error) {
		rep, err := bench.RunValues(ctx, vc)
		if rep == nil {
			return "", err
		}
		return rep.Markdown(), err
	})
}

// parseValues parses values' flags; code is -1 to go on, else the exit code (2: bad usage).
func parseValues(args []string, stderr io.Writer) (vc bench.ValuesConfig, code int) {
	var out string
	var brokers, codecs string
	fs := flag.NewFlagSet("cdc-bench values", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&vc.PGURL, "pg-url", os.Getenv("CDC_RELAY_PG_URL"), "PostgreSQL URL (default $CDC_RELAY_PG_URL)")
	fs.StringVar(&brokers, "brokers", os.Getenv("CDC_RELAY_BROKERS"), "Kafka brokers, comma-separated (default $CDC_RELAY_BROKERS)")
	fs.StringVar(&vc.RegistryURL, "registry-url", os.Getenv("CDC_RELAY_REGISTRY_URL"), "schema registry, Confluent API (default $CDC_RELAY_REGISTRY_URL)")
	fs.IntVar(&vc.Rows, "rows", 20_000, "rows of each value-format drain")
	fs.IntVar(&vc.CodecRows, "codec-rows", 2_000, "rows of each codec drain")
	fs.IntVar(&vc.Payload, "payload", 10_240, "payload bytes per row of the codec drains")
	fs.BoolVar(&vc.RandomPayload, "random-payload", false, "pad the codec drains' payloads with random hex as the backlog phase does (at most 2x compressible) instead of order documents of line items")
	fs.IntVar(&vc.Rate, "rate", 2000, "steady rate of each value format, rows per second (its p99 is reported)")
	fs.DurationVar(&vc.Duration, "duration", 15*time.Second, "how long each value format's steady rate is held (after --warmup)")
	fs.DurationVar(&vc.Warmup, "warmup", 2*time.Second, "load written at the steady rate before the measured part")
	fs.IntVar(&vc.Repeats, "repeats", 3, "drains and steady runs of each format and codec, interleaved; the tables show the medians")
	fs.StringVar(&codecs, "codecs", strings.Join(bench.DefaultCodecs, ","), "--compression settings compared, comma-separated, the first the baseline")
	fs.IntVar(&vc.Writers, "writers", 8, "connections writing the steady load")
	fs.IntVar(&vc.Partitions, "partitions", 3, "partitions per benchmark topic")
	fs.StringVar(&out, "out", "results", "results folder: the run goes into <out>/values-<date>/")
	fs.StringVar(&vc.RelayBin, "relay-bin", "", "cdc-relay binary to benchmark (default: built from this module)")
	fs.DurationVar(&vc.DrainTimeout, "drain-timeout", 2*time.Minute, "how long to wait for the last records of a phase")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return vc, 0
		}
		return vc, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cdc-bench values: unexpected argument %q (flags only)\n", fs.Arg(0))
		return vc, 2
	}
	if vc.Rows <= 0 || vc.CodecRows <= 0 || vc.Payload <= 0 || vc.Rate <= 0 || vc.Duration <= 0 || vc.Repeats <= 0 {
		fmt.Fprintf(stderr, "cdc-bench values: --rows, --codec-rows, --payload, --rate, --duration and --repeats must be > 0\n")
		return vc, 2
	}
	var err error
	if vc.Codecs, err = bench.ParseCodecs(codecs); err != nil {
		fmt.Fprintf(stderr, "cdc-bench values: --codecs: %v\n", err)
		return vc, 2
	}
	if brokers != "" {
		vc.Brokers = strings.Split(brokers, ",")
	}
	vc.OutDir = filepath.Join(out, "values-"+time.Now().UTC().Format("2006-01-02T150405Z"))
	vc.Command = strings.Join(append([]string{"cdc-bench", "values"}, args...), " ")
	if err := vc.Validate(); err != nil {
		fmt.Fprintf(stderr, "cdc-bench values: %v\n", err)
		return vc, 2
	}
	return vc, -1
}
