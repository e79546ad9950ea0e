// Command cdc-chaos is the chaos soak of cdc-relay: it writes outbox rows at a steady rate in
// random multi-row transactions (some rolled back) while it kills the relay -9 and restarts it
// every few seconds, pauses Kafka once and restarts PostgreSQL once; then an independent
// consumer checks that every committed outbox id was delivered, no rolled-back one was, and
// per key the first deliveries came in commit order. It prints the duplicate count and the
// largest number of duplicates one crash caused, and exits 1 on any loss.
//
//	go build -o bin/cdc-relay ./cmd/cdc-relay
//	eval "$(scripts/dev-up.sh)"
//	go run ./cmd/cdc-chaos --relay-bin bin/cdc-relay            # 100,000 rows (make chaos)
//	go run ./cmd/cdc-chaos --relay-bin bin/cdc-relay --rows 5000 --rate 500 --max-kills 3 --pause 5s
//
// It controls the services with scripts/kafka-ctl.sh and scripts/pg-ctl.sh: everyone using
// them is disturbed. Run it against a private pair (CDC_RELAY_DEV_DIR and the
// CDC_RELAY_DEV_*_PORT variables) when others share the default one.
//
// Exit codes: 0 the contract held, 1 it did not (or the run failed), 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cdc-relay/cdc-relay/internal/chaos"
)

func main() {
	var cfg chaos.Config
	var brokers string
	fs := flag.NewFlagSet("cdc-chaos", flag.ContinueOnError)
	fs.StringVar(&cfg.PGURL, "pg-url", os.Getenv("CDC_RELAY_PG_URL"), "PostgreSQL URL (default $CDC_RELAY_PG_URL)")
	fs.StringVar(&brokers, "brokers", os.Getenv("CDC_RELAY_BROKERS"), "Kafka brokers, comma-separated (default $CDC_RELAY_BROKERS)")
	fs.StringVar(&cfg.RelayBin, "relay-bin", "bin/cdc-relay", "the cdc-relay binary to run")
	fs.StringVar(&cfg.Scripts, "scripts", "scripts", "directory of kafka-ctl.sh and pg-ctl.sh")
	fs.IntVar(&cfg.Rows, "rows", 100_000, "outbox rows to commit")
	fs.IntVar(&cfg.Rate, "rate", 2_000, "rows per second to write")
	fs.IntVar(&cfg.MaxTxRows, "max-tx-rows", 20, "most rows in one transaction")
	fs.Float64Var(&cfg.Rollback, "rollback", 0.1, "fraction of transactions rolled back")
	fs.IntVar(&cfg.Keys, "keys", 64, "distinct aggregate ids")
	fs.DurationVar(&cfg.KillEvery, "kill-every", 0, "mean interval between kill -9s of the relay (default 3s)")
	fs.IntVar(&cfg.MaxKills, "max-kills", 0, "number of kills, made even after the writing ends (0: as many as fit while writing)")
	fs.DurationVar(&cfg.Pause, "pause", 0, "how long Kafka is paused, once (default 10s; negative: never)")
	fs.BoolVar(&cfg.NoPGRestart, "no-pg-restart", false, "do not restart PostgreSQL")
	fs.DurationVar(&cfg.CatchUp, "catch-up", 0, "how long to wait for every row after writing ends (default 5m)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "random seed (0: pick one; it is printed)")
	fs.StringVar(&cfg.Name, "name", "", "name of the table, slot, publication and topics (default chaos_<unix time>)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the table, slot, publication and topics")
	fs.StringVar(&cfg.LogDir, "log-dir", "", "directory for the relay's logs (default: a new temporary one)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.Brokers = append(cfg.Brokers, b)
		}
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "cdc-chaos: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cdc-chaos: %v\n", err)
		os.Exit(1) //nolint:gocritic // exitAfterDefer: the deferred stop only releases the signal handler, as exiting does
	}
	res.Print(os.Stdout)
	if err := res.Err(); err != nil {
		fmt.Fprintf(os.Stdout, "FAIL: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stdout, "PASS: every committed row delivered, no rolled-back row, per-key commit order kept")
}
