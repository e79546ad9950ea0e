// Command cdc-bench compares cdc-relay's `run`, at-least-once and exactly-once (run-eos: `run
// --delivery exactly-once`, read by read_committed consumers), with the polling publisher (`poll`), with
// Debezium's PostgreSQL connector and outbox EventRouter on Kafka Connect (as shipped and
// tuned), and with the limit of one walsender (pg_recvlogical) on the local PostgreSQL and
// Kafka:
//
//	eval "$(scripts/dev-up.sh)"
//	go run ./cmd/cdc-bench [--quick] [--out results]
//
// It writes table.md, report.json, latency-cdf.svg and the publishers' logs into
// <out>/<UTC date and time>/, points <out>/latest at it, prints the table on stdout and its
// progress on stderr. Exit codes: 0 done (targets met or not: the table says), 1 a phase
// failed, 2 bad usage.
//
//	go run ./cmd/cdc-bench docs [--report ../results/latest/report.json] [--allow-busy] ../docs/benchmark.md ../README.md
//
// rewrites the published figures (the sections between <!-- cdc-bench:NAME begin/end -->
// markers) from a run's report.json, and refuses a run with phases on a busy machine unless
// --allow-busy (exit 1).
//
//	go run ./cmd/cdc-bench shapes [--rows 100000] [--payload 512] [--repeats 3]
//
// drains the same backlog from a plain, a bytea and a partitioned outbox side by side
// (docs/benchmark.md, "Outbox shapes").
//
//	go run ./cmd/cdc-bench values [--rows 20000] [--rate 2000] [--codecs none,snappy,lz4,zstd:1,gzip]
//
// compares json, avro and protobuf values and each compression codec side by side
// (docs/benchmark.md, "Value formats and compression").
//
//	go run ./cmd/cdc-bench shards [--rows 200000] [--shards 1,2,4] [--repeats 3]
//
// drains one backlog with 1, 2 and 4 shards side by side, and measures what a shard's row
// filter costs a walsender (docs/benchmark.md, "Shards").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/tools/internal/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "docs" {
		return docs(args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "shapes" {
		return shapes(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "values" {
		return values(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "shards" {
		return shards(args[1:], stdout, stderr)
	}
	var (
		cfg     bench.Config
		quick   bool
		out     string
		brokers string
		rates   string
		sizes   string
		pubs    string
		runArgs string
		pollArg string
	)
	fs := flag.NewFlagSet("cdc-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.PGURL, "pg-url", os.Getenv("CDC_RELAY_PG_URL"), "PostgreSQL URL (default $CDC_RELAY_PG_URL)")
	fs.StringVar(&brokers, "brokers", os.Getenv("CDC_RELAY_BROKERS"), "Kafka brokers, comma-separated (default $CDC_RELAY_BROKERS)")
	fs.BoolVar(&quick, "quick", false, "shorten the suite: 5s per rate after 2s of warm-up, a 20,000-row backlog and 2,000 large rows drained once, the kill 5s after the first record (flags given explicitly still win)")
	fs.DurationVar(&cfg.Duration, "duration", 20*time.Second, "how long each steady rate is held")
	fs.StringVar(&rates, "rates", "500,2000,5000", "steady rates, rows per second, comma-separated")
	fs.IntVar(&cfg.Backlog, "backlog", 200_000, "rows in the backlog drain test")
	fs.StringVar(&sizes, "tx-sizes", "1,100", "transaction sizes the backlog is written with, comma-separated")
	fs.IntVar(&cfg.Repeats, "repeats", 3, "drains of each backlog per publisher, interleaved; the table shows the median")
	fs.IntVar(&cfg.SteadyRepeats, "steady-repeats", 1, "runs of each steady rate per publisher, interleaved in a rotating order; the table shows the medians and every run (use 3 or more on a machine that is not quiet)")
	fs.StringVar(&pubs, "publishers", "run,run-eos,poll:100ms,poll:10ms,debezium,debezium-tuned",
		"publishers to compare, comma-separated, any subset: run, run-eos (run --delivery exactly-once, measured by read_committed consumers), run-traced[:<ratio>] (run exporting a span per record, or per sampled record, to an in-process OTLP receiver), poll:<interval>, debezium (as shipped) or debezium-tuned ("+strings.Join(bench.DebeziumTuned, " ")+
			"), each optionally followed by +ARG for extra arguments (debezium: +key=value connector settings, +worker.key=value worker settings), #BINARY for another cdc-relay build and @VAR=value[;VAR=value] for its environment (e.g. run+--linger=2ms#/tmp/cdc-relay-old@GOGC=400, debezium+max.batch.size=512)")
	fs.StringVar(&runArgs, "run-args", "", "extra arguments for every `cdc-relay run`, space-separated (e.g. \"--linger 1ms\")")
	fs.StringVar(&pollArg, "poll-args", "", "extra arguments for every `cdc-relay poll`, space-separated (e.g. \"--batch 1000\")")
	fs.IntVar(&cfg.Writers, "writers", 8, "connections writing the steady load")
	fs.IntVar(&cfg.Partitions, "partitions", 3, "partitions per benchmark topic")
	fs.BoolVar(&cfg.Profile, "profile", false, "every cdc-relay publisher writes a CPU profile of its life into <run>/profiles/<log name>.pprof (go tool pprof BINARY FILE)")
	fs.BoolVar(&cfg.SkipSteady, "skip-steady", false, "leave out the steady-load part")
	fs.BoolVar(&cfg.SkipBacklog, "skip-backlog", false, "leave out the backlog part")
	fs.BoolVar(&cfg.SkipReplay, "skip-replay", false, "leave out the kill -9 part")
	fs.DurationVar(&cfg.Warmup, "warmup", 5*time.Second, "load written at each steady rate before the measured part")
	fs.IntVar(&cfg.LargeRows, "large-rows", 20_000, "rows in the large-payload drain (1-row transactions, reported in MB/s); -1 leaves it out")
	fs.IntVar(&cfg.LargePayload, "payload", 10_240, "payload bytes per row in the large-payload drain")
	fs.IntVar(&cfg.ReplayRate, "replay-rate", 2000, "rows per second during the kill -9 test")
	fs.DurationVar(&cfg.KillAfter, "kill-after", 30*time.Second, "kill -9 each publisher this long after its first record (the load goes on as long again)")
	fs.StringVar(&cfg.DebeziumHome, "debezium-home", os.Getenv("CDC_RELAY_DEBEZIUM_HOME"), "directory with lib/ (Kafka Connect) and plugins/ (Debezium) (default $CDC_RELAY_DEBEZIUM_HOME, else fetched by scripts/debezium-jars.sh)")
	fs.StringVar(&out, "out", "results", "results folder: the run goes into <out>/<date>/ and <out>/latest points at it")
	fs.StringVar(&cfg.PGBin, "pg-bin", "", "directory of pg_recvlogical (default $CDC_RELAY_DEV_PG_BIN, else pg_config --bindir)")
	fs.StringVar(&cfg.RelayBin, "relay-bin", "", "cdc-relay binary to benchmark (default: built from this module)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 2*time.Minute, "how long to wait for the last records of a phase")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if quick {
		// --quick shortens what was not given explicitly.
		q := cfg.Quick()
		for name, apply := range map[string]func(){
			"duration":   func() { cfg.Duration = q.Duration },
			"backlog":    func() { cfg.Backlog = q.Backlog },
			"repeats":    func() { cfg.Repeats = q.Repeats },
			"warmup":     func() { cfg.Warmup = q.Warmup },
			"large-rows": func() { cfg.LargeRows = q.LargeRows },
			"kill-after": func() { cfg.KillAfter = q.KillAfter },
		} {
			if !set[name] {
				apply()
			}
		}
	}
	var err error
	if cfg.Rates, err = ints(rates); err != nil {
		fmt.Fprintf(stderr, "cdc-bench: --rates: %v\n", err)
		return 2
	}
	if cfg.TxSizes, err = ints(sizes); err != nil {
		fmt.Fprintf(stderr, "cdc-bench: --tx-sizes: %v\n", err)
		return 2
	}
	if cfg.Publishers, err = publishers(pubs); err != nil {
		fmt.Fprintf(stderr, "cdc-bench: --publishers: %v\n", err)
		return 2
	}
	for i, p := range cfg.Publishers {
		switch {
		case p.Debezium:
		case p.Poll:
			cfg.Publishers[i].Args = append(strings.Fields(pollArg), p.Args...)
		default:
			cfg.Publishers[i].Args = append(strings.Fields(runArgs), p.Args...)
		}
	}
	if brokers != "" {
		cfg.Brokers = strings.Split(brokers, ",")
	}
	stamp := time.Now().UTC().Format("2006-01-02T150405Z")
	cfg.OutDir = filepath.Join(out, stamp)
	cfg.Progress = stderr
	cfg.Command = strings.Join(append([]string{"cdc-bench"}, args...), " ")
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "cdc-bench: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if spans, reqs, ok := bench.TracedSpans(); ok {
		fmt.Fprintf(stderr, "cdc-bench: the traced publishers exported %d spans in %d OTLP requests\n", spans, reqs)
	}
	if rep != nil {
		fmt.Fprint(stdout, rep.Markdown())
		latest := filepath.Join(out, "latest")
		_ = os.Remove(latest)
		if lerr := os.Symlink(stamp, latest); lerr != nil {
			fmt.Fprintf(stderr, "cdc-bench: link %s: %v\n", latest, lerr)
		}
		fmt.Fprintf(stderr, "cdc-bench: results in %s\n", cfg.OutDir)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cdc-bench: %v\n", err)
		return 1
	}
	return 0
}

func ints(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(p, "_", ""))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", p)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// publishers parses "run,poll:100ms,poll:10ms,run@GOMAXPROCS=1".
func publishers(s string) ([]bench.Publisher, error) {
	var out []bench.Publisher
	for _, p := range strings.Split(s, ",") {
		spec, env, _ := strings.Cut(strings.TrimSpace(p), "@")
		spec, bin, _ := strings.Cut(spec, "#")
		spec, extra, _ := strings.Cut(spec, "+")
		var pub bench.Publisher
		switch kind, arg, _ := strings.Cut(spec, ":"); {
		case kind == "run" && arg == "":
			pub = bench.Publisher{Name: "run"}
		case kind == bench.RunEOS && arg == "":
			pub = bench.Publisher{Name: bench.RunEOS, ExactlyOnce: true}
		case kind == "run-traced" && arg == "":
			pub = bench.Publisher{Name: "run-traced", Traced: true}
		case kind == "run-traced":
			// run-traced:RATIO samples root spans at RATIO (a name short enough for the
			// benchmark's table names, which @OTEL_TRACES_SAMPLER=... is not).
			if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
				return nil, fmt.Errorf("%q: want run-traced:<ratio>, a sampling ratio from 0 to 1, e.g. run-traced:0.1", p)
			}
			pub = bench.Publisher{Name: "run-traced " + arg, Traced: true,
				Env: []string{"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=" + arg}}
		case kind == "poll":
			d, err := time.ParseDuration(arg)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%q: want poll:<interval>, e.g. poll:100ms", p)
			}
			pub = bench.Publisher{Name: "poll " + d.String(), Poll: true, Interval: d}
		case kind == "debezium" && arg == "":
			pub = bench.DebeziumPublishers[0]
		case kind == "debezium-tuned" && arg == "":
			pub = bench.DebeziumPublishers[1]
			pub.Args = slices.Clone(pub.Args)
		default:
			return nil, fmt.Errorf("%q: want run, run-eos, poll:<interval>, debezium or debezium-tuned (or run-traced)", p)
		}
		if pub.Debezium && bin != "" {
			return nil, fmt.Errorf("%q: #BINARY is for cdc-relay builds, not debezium", p)
		}
		if bin != "" {
			pub.Bin = bin
			pub.Name += " [" + filepath.Base(bin) + "]"
		}
		if extra != "" {
			more := strings.Split(extra, "+")
			pub.Args = append(pub.Args, more...)
			pub.Name += " " + strings.Join(more, " ")
		}
		if env != "" {
			pub.Env = strings.Split(env, ";")
			pub.Name += " " + strings.Join(pub.Env, " ")
		}
		out = append(out, pub)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// docs is `cdc-bench docs`: the published tables from a report.json.
func docs(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("cdc-bench docs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	report := fs.String("report", "results/latest/report.json", "the run's report.json")
	link := fs.String("link", "", "the run's table.md as the files link it from the repository's root (default results/<the report's directory>/table.md)")
	allowBusy := fs.Bool("allow-busy", false, "publish a run with phases on a busy machine (its absolute figures are a share of the machine's)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: cdc-bench docs [--report results/latest/report.json] [--allow-busy] FILE...\n"+
			"rewrites the sections between <!-- cdc-bench:tables begin --> / <!-- cdc-bench:summary begin --> and their end markers\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "cdc-bench docs: name the files to update (e.g. docs/benchmark.md README.md)\n")
		return 2
	}
	rep, err := bench.ReadReport(*report)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-bench docs: --report: %v\n", err)
		return 2
	}
	if *link == "" {
		dir, err := filepath.EvalSymlinks(filepath.Dir(*report))
		if err != nil {
			fmt.Fprintf(stderr, "cdc-bench docs: --report: %v\n", err)
			return 2
		}
		*link = "results/" + filepath.Base(dir) + "/table.md"
	}
	if err := bench.UpdateDocs(rep, *link, *allowBusy, fs.Args()...); err != nil {
		fmt.Fprintf(stderr, "cdc-bench docs: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "cdc-bench docs: %s updated from %s\n", strings.Join(fs.Args(), ", "), *link)
	return 0
}
