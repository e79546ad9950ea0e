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

// shapesUsage is `cdc-bench shapes -h`'s first lines.
const shapesUsage = `usage: cdc-bench shapes [--rows 100000] [--payload 512] [--tx-size 100] [--repeats 3] [--out results]
drains the same backlog from a plain outbox (jsonb payload), a bytea one and one partitioned into
4 by range of id (published through its root) with cdc-relay run, interleaved, and prints the
median drain of each, its rate against plain's and the relay's CPU per 10,000 rows
`

// shapesConfig parses `cdc-bench shapes`' arguments; ok false means exit with code (0 for -h).
func shapesConfig(args []string, stderr io.Writer) (cfg bench.ShapesConfig, code int, ok bool) {
	fs := flag.NewFlagSet("cdc-bench shapes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var brokers, out string
	fs.StringVar(&cfg.PGURL, "pg-url", os.Getenv("CDC_RELAY_PG_URL"), "PostgreSQL URL (default $CDC_RELAY_PG_URL)")
	fs.StringVar(&brokers, "brokers", os.Getenv("CDC_RELAY_BROKERS"), "Kafka brokers, comma-separated (default $CDC_RELAY_BROKERS)")
	fs.IntVar(&cfg.Rows, "rows", 100_000, "rows in each shape's backlog")
	fs.IntVar(&cfg.Payload, "payload", 512, "payload bytes per row (a JSON document; the bytea shape holds its text's bytes)")
	fs.IntVar(&cfg.TxSize, "tx-size", 100, "rows per transaction the backlogs are written with")
	fs.IntVar(&cfg.Repeats, "repeats", 3, "drains of each shape, interleaved; the table shows the median")
	fs.StringVar(&out, "out", "results", "results folder: the run's table.md and logs go into <out>/shapes-<date>/")
	fs.StringVar(&cfg.RelayBin, "relay-bin", "", "cdc-relay binary to benchmark (default: built from this module)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 2*time.Minute, "how long to wait for each drain")
	fs.Usage = func() {
		fmt.Fprint(stderr, shapesUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, 0, false
		}
		return cfg, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cdc-bench shapes: unexpected argument %q (every setting is a --flag)\n", fs.Arg(0))
		return cfg, 2, false
	}
	for name, v := range map[string]int{"rows": cfg.Rows, "payload": cfg.Payload, "tx-size": cfg.TxSize, "repeats": cfg.Repeats} {
		if v <= 0 {
			fmt.Fprintf(stderr, "cdc-bench shapes: --%s %d: want a positive number\n", name, v)
			return cfg, 2, false
		}
	}
	if brokers != "" {
		cfg.Brokers = strings.Split(brokers, ",")
	}
	cfg.OutDir = filepath.Join(out, "shapes-"+time.Now().UTC().Format("2006-01-02T150405Z"))
	cfg.Progress = stderr
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "cdc-bench shapes: %v\n", err)
		return cfg, 2, false
	}
	return cfg, 0, true
}

// shapes is `cdc-bench shapes`: the drain rate of each outbox shape, side by side.
func shapes(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := shapesConfig(args, stderr)
	if !ok {
		return code
	}
	return runReport("shapes", cfg.OutDir, stdout, stderr, func(ctx context.Context) (string, error) {
		res, err := bench.RunShapes(ctx, cfg)
		if res == nil {
			return "", err
		}
		return res.Markdown(), err
	})
}
