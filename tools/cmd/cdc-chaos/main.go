// Command cdc-chaos is the chaos soak of cdc-relay: it writes outbox rows at a steady rate in
// random multi-row transactions (some rolled back) while it kills the relay holding the slot -9
// every few seconds (a standby relay waits beside it, and the killed one is restarted at once),
// pauses Kafka once, makes the holder a zombie once (SIGSTOP past its wal_sender_timeout, until
// the standby took over and published, then SIGCONT) and restarts PostgreSQL once; then an
// independent consumer checks that every committed outbox id was delivered, no rolled-back one
// was, and per key the first deliveries came in commit order. It prints the duplicate count and
// the largest number of duplicates one crash caused, and exits 1 on any loss.
//
// --delivery exactly-once runs the relays with that flag and reads read_committed: one
// duplicate fails it too, and so does a record of an aborted transaction read; a
// read_uncommitted reader beside it counts the records the aborted transactions hold, and each
// kill and the zombie's pause wait (up to 3 s) until that reader sees the holder's open Kafka
// transaction hold records, so that every fault leaves an aborted transaction behind.
// --delivery at-least-once,exactly-once runs both, one after the other with the same seed, and
// ends with a table of the two side by side (make chaos).
//
//	go build -o bin/cdc-relay ./cmd/cdc-relay
//	eval "$(scripts/dev-up.sh)"
//	go run ./cmd/cdc-chaos --relay-bin bin/cdc-relay            # 100,000 rows, at-least-once
//	go run ./cmd/cdc-chaos --relay-bin bin/cdc-relay --delivery at-least-once,exactly-once --max-kills 30
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
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/chaos"
)

func main() {
	var cfg chaos.Config
	var brokers, deliveries, relayArgs string
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
	fs.StringVar(&deliveries, "delivery", chaos.AtLeastOnce, "the relay's --delivery: at-least-once or exactly-once, or both comma-separated (run one after the other, same seed, compared at the end)")
	fs.BoolVar(&cfg.NoStandby, "no-standby", false, "run one relay on the slot, no standby beside it (and no zombie)")
	fs.BoolVar(&cfg.NoZombie, "no-zombie", false, "do not make the slot's holder a zombie (SIGSTOP past its wal_sender_timeout, then SIGCONT)")
	fs.DurationVar(&cfg.WalSenderTimeout, "wal-sender-timeout", 0, "wal_sender_timeout of the relays' sessions, the zombie's pause's lower bound (default 5s)")
	fs.StringVar(&relayArgs, "relay-args", "", "extra arguments for every `cdc-relay run`, space-separated (e.g. \"--transaction-interval 50ms\")")
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
	cfg.RelayArgs = strings.Fields(relayArgs)
	var modes []string
	for _, d := range strings.Split(deliveries, ",") {
		if d = strings.TrimSpace(d); d != "" {
			modes = append(modes, d)
		}
	}
	if len(modes) == 0 {
		fmt.Fprintf(os.Stderr, "cdc-chaos: --delivery: name at-least-once, exactly-once or both\n")
		os.Exit(2)
	}
	for _, m := range modes {
		c := cfg
		c.Delivery = m
		if err := c.Validate(); err != nil {
			fmt.Fprintf(os.Stderr, "cdc-chaos: %v\n", err)
			os.Exit(2)
		}
	}
	if len(modes) > 1 {
		if cfg.Seed == 0 {
			cfg.Seed = rand.Uint64() // the same schedule of rows and kills for every mode
		}
		if cfg.Name == "" {
			cfg.Name = fmt.Sprintf("chaos_%d", time.Now().Unix())
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(soak(ctx, cfg, modes)) //nolint:gocritic // exitAfterDefer: the deferred stop only releases the signal handler, as exiting does
}

// soak runs the soak once per delivery mode and returns the exit code.
func soak(ctx context.Context, cfg chaos.Config, modes []string) int {
	code := 0
	var results []*chaos.Result
	for _, m := range modes {
		c := cfg
		c.Delivery = m
		if len(modes) > 1 {
			c.Name += "_" + strings.ReplaceAll(m, "-", "_")
			if c.LogDir != "" {
				c.LogDir = filepath.Join(c.LogDir, m)
			}
		}
		res, err := chaos.Run(ctx, c)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cdc-chaos: %s: %v\n", m, err)
			return 1
		}
		res.Print(os.Stdout)
		if err := res.Err(); err != nil {
			fmt.Fprintf(os.Stdout, "FAIL (%s): %v\n", m, err)
			code = 1
		} else if m == chaos.ExactlyOnce {
			fmt.Fprintln(os.Stdout, "PASS (exactly-once): every committed row delivered once, read_committed; no rolled-back row, no aborted record, per-key commit order kept")
		} else {
			fmt.Fprintf(os.Stdout, "PASS (%s): every committed row delivered, no rolled-back row, per-key commit order kept\n", m)
		}
		results = append(results, res)
	}
	if len(results) > 1 {
		chaos.PrintSideBySide(os.Stdout, results)
	}
	return code
}
