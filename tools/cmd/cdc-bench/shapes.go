package main

import (
	"context"
	"io"
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
	s := newSubcommand("shapes", shapesUsage, &cfg.PGURL, &cfg.RelayBin, stderr)
	s.fs.IntVar(&cfg.Rows, "rows", 100_000, "rows in each shape's backlog")
	s.fs.IntVar(&cfg.Payload, "payload", 512, "payload bytes per row (a JSON document; the bytea shape holds its text's bytes)")
	s.fs.IntVar(&cfg.TxSize, "tx-size", 100, "rows per transaction the backlogs are written with")
	s.fs.IntVar(&cfg.Repeats, "repeats", 3, "drains of each shape, interleaved; the table shows the median")
	s.fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 2*time.Minute, "how long to wait for each drain")
	s.parse(args)
	s.positive(map[string]int{"rows": cfg.Rows, "payload": cfg.Payload, "tx-size": cfg.TxSize, "repeats": cfg.Repeats})
	cfg.Progress = stderr
	s.finish(&cfg.Brokers, &cfg.OutDir)
	s.check(cfg.Validate)
	if !s.ok() {
		return cfg, s.code, false
	}
	return cfg, 0, true
}

// shapes is `cdc-bench shapes`: the drain rate of each outbox shape, side by side.
func shapes(args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := shapesConfig(args, stderr)
	if ok {
		code = -1
	}
	return runReport(code, "shapes", cfg.OutDir, stdout, stderr, func(ctx context.Context) (*bench.ShapesResult, error) {
		return bench.RunShapes(ctx, cfg)
	})
}
