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

// shardsUsage is `cdc-bench shards -h`'s first lines.
const shardsUsage = `usage: cdc-bench shards [--rows 200000] [--tx-size 1] [--shards 1,2,4] [--filter-rows N] [--repeats 3] [--out results]
drains a backlog with 1, 2 and 4 shards side by side (slot create --shards N, then N relays
run --shard I/N on one topic), interleaved, and prints each count's rows/s, each walsender's and
the relays' CPU per 10,000 rows; then what a shard's row filter costs a walsender for the rows it
skips against the rows it sends (pg_recvlogical on a backlog of one key)
`

// shards is `cdc-bench shards`: the drain of one backlog by 1, 2 and 4 shards, and the
// filter's cost to a walsender (bench.RunShards).
func shards(args []string, stdout, stderr io.Writer) int {
	sc, code := parseShards(args, stderr)
	if code >= 0 {
		return code
	}
	sc.Progress = stderr
	return runReport("shards", sc.OutDir, stdout, stderr, func(ctx context.Context) (string, error) {
		rep, err := bench.RunShards(ctx, sc)
		if rep == nil {
			return "", err
		}
		return rep.Markdown(), err
	})
}

// parseShards parses shards' flags; code is -1 to go on, else the exit code (2: bad usage).
func parseShards(args []string, stderr io.Writer) (sc bench.ShardsConfig, code int) {
	var out, brokers, counts string
	fs := flag.NewFlagSet("cdc-bench shards", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&sc.PGURL, "pg-url", os.Getenv("CDC_RELAY_PG_URL"), "PostgreSQL URL (default $CDC_RELAY_PG_URL)")
	fs.StringVar(&brokers, "brokers", os.Getenv("CDC_RELAY_BROKERS"), "Kafka brokers, comma-separated (default $CDC_RELAY_BROKERS)")
	fs.IntVar(&sc.Rows, "rows", 200_000, "rows of the backlog each shard count drains")
	fs.IntVar(&sc.TxSize, "tx-size", 1, "rows per transaction the backlogs are written with")
	fs.StringVar(&counts, "shards", "1,2,4", "shard counts compared, comma-separated (0: the unsharded relay); the ratio column is against 1 shard")
	fs.IntVar(&sc.FilterRows, "filter-rows", 0, "rows of the filter-cost backlog (default --rows; -1 leaves that table out)")
	fs.IntVar(&sc.Repeats, "repeats", 3, "drains of each shard count and filter case, interleaved; the tables show the medians")
	fs.IntVar(&sc.Partitions, "partitions", 3, "partitions of the topic the shards publish to")
	fs.StringVar(&out, "out", "results", "results folder: the run goes into <out>/shards-<date>/")
	fs.StringVar(&sc.PGBin, "pg-bin", "", "directory of pg_recvlogical (default $CDC_RELAY_DEV_PG_BIN, else pg_config --bindir)")
	fs.StringVar(&sc.RelayBin, "relay-bin", "", "cdc-relay binary to benchmark (default: built from this module)")
	fs.DurationVar(&sc.DrainTimeout, "drain-timeout", 2*time.Minute, "how long to wait for each drain")
	fs.Usage = func() {
		fmt.Fprint(stderr, shardsUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return sc, 0
		}
		return sc, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cdc-bench shards: unexpected argument %q (flags only)\n", fs.Arg(0))
		return sc, 2
	}
	for name, v := range map[string]int{"rows": sc.Rows, "tx-size": sc.TxSize, "repeats": sc.Repeats, "partitions": sc.Partitions} {
		if v <= 0 {
			fmt.Fprintf(stderr, "cdc-bench shards: --%s %d: want a positive number\n", name, v)
			return sc, 2
		}
	}
	var err error
	if sc.Shards, err = bench.ParseShardCounts(counts); err != nil {
		fmt.Fprintf(stderr, "cdc-bench shards: --shards: %v\n", err)
		return sc, 2
	}
	if brokers != "" {
		sc.Brokers = strings.Split(brokers, ",")
	}
	sc.OutDir = filepath.Join(out, "shards-"+time.Now().UTC().Format("2006-01-02T150405Z"))
	sc.Command = strings.Join(append([]string{"cdc-bench", "shards"}, args...), " ")
	if err := sc.Validate(); err != nil {
		fmt.Fprintf(stderr, "cdc-bench shards: %v\n", err)
		return sc, 2
	}
	return sc, -1
}
