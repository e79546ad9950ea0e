package main

import (
	"context"
	"io"
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
	return runReport(code, "shards", sc.OutDir, stdout, stderr, func(ctx context.Context) (*bench.ShardsReport, error) {
		return bench.RunShards(ctx, sc)
	})
}

// parseShards parses shards' flags; code is -1 to go on, else the exit code (2: bad usage).
func parseShards(args []string, stderr io.Writer) (sc bench.ShardsConfig, code int) {
	var counts string
	s := newSubcommand("shards", shardsUsage, &sc.PGURL, &sc.RelayBin, stderr)
	s.fs.IntVar(&sc.Rows, "rows", 200_000, "rows of the backlog each shard count drains")
	s.fs.IntVar(&sc.TxSize, "tx-size", 1, "rows per transaction the backlogs are written with")
	s.fs.StringVar(&counts, "shards", "1,2,4", "shard counts compared, comma-separated (0: the unsharded relay); the ratio column is against 1 shard")
	s.fs.IntVar(&sc.FilterRows, "filter-rows", 0, "rows of the filter-cost backlog (default --rows; -1 leaves that table out)")
	s.fs.IntVar(&sc.Repeats, "repeats", 3, "drains of each shard count and filter case, interleaved; the tables show the medians")
	s.fs.IntVar(&sc.Partitions, "partitions", 3, "partitions of the topic the shards publish to")
	s.fs.StringVar(&sc.PGBin, "pg-bin", "", "directory of pg_recvlogical (default $CDC_RELAY_DEV_PG_BIN, else pg_config --bindir)")
	s.fs.DurationVar(&sc.DrainTimeout, "drain-timeout", 2*time.Minute, "how long to wait for each drain")
	s.parse(args)
	s.positive(map[string]int{"rows": sc.Rows, "tx-size": sc.TxSize, "repeats": sc.Repeats, "partitions": sc.Partitions})
	if s.ok() {
		var err error
		if sc.Shards, err = bench.ParseShardCounts(counts); err != nil {
			s.fail("--shards: %v", err)
		}
	}
	sc.Command, sc.Progress = s.command(args), stderr
	s.finish(&sc.Brokers, &sc.OutDir)
	s.check(sc.Validate)
	return sc, s.code
}
