package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Publisher is one publisher configuration under test.
type Publisher struct {
	// Name labels the publisher in the report: "run", "poll 100ms", ...
	Name string
	// Poll selects `cdc-relay poll` (with Interval); otherwise `cdc-relay run`.
	Poll     bool
	Interval time.Duration
	// Args are extra command-line arguments for the publisher (e.g. "--linger", "1ms").
	Args []string
	// Env are extra environment variables for the publisher (e.g. "GOMAXPROCS=1").
	Env []string
	// Bin, when set, is the cdc-relay binary of this publisher (to compare builds).
	Bin string
	// Traced exports the publisher's spans over OTLP to an in-process receiver (trace.go):
	// the cost of tracing, beside the same publisher untraced.
	Traced bool
	// ExactlyOnce runs `cdc-relay run --delivery exactly-once` (RunEOS), with a checkpoint
	// topic of its own per fixture; its consumers read read_committed, what that mode's
	// consumers see, and its drains end when a read_committed consumer has read every record
	// (a transaction's records count once it committed, and the topic's high watermarks also
	// count its markers).
	ExactlyOnce bool
	// Debezium selects Debezium's PostgreSQL connector with the outbox EventRouter on Kafka
	// Connect standalone instead of cdc-relay. Its Args are key=value settings: the
	// connector's, or the worker's when the key starts with "worker." (DebeziumTuned).
	Debezium bool
}

// DebeziumPublishers are Debezium as shipped and tuned for latency (DebeziumTuned).
var DebeziumPublishers = []Publisher{
	{Name: "debezium", Debezium: true},
	{Name: "debezium tuned", Debezium: true, Args: DebeziumTuned},
}

// RunEOS labels `run --delivery exactly-once` (--publishers run-eos); TransactionInterval is
// its default --transaction-interval, the latency its targets allow it over run's.
const (
	RunEOS              = "run-eos"
	TransactionInterval = 100 * time.Millisecond
)

// DefaultPublishers are the relay at-least-once and exactly-once, the poller at 100ms and at
// 10ms, and Debezium as shipped and tuned.
var DefaultPublishers = append([]Publisher{
	{Name: "run"},
	{Name: RunEOS, ExactlyOnce: true},
	{Name: "poll 100ms", Poll: true, Interval: 100 * time.Millisecond},
	{Name: "poll 10ms", Poll: true, Interval: 10 * time.Millisecond},
}, DebeziumPublishers...)

// Config configures a benchmark run. Zero fields take the defaults stated.
type Config struct {
	// PGURL is the PostgreSQL URL. Default $CDC_RELAY_PG_URL.
	PGURL string
	// Brokers are the Kafka seed brokers. Default $CDC_RELAY_BROKERS.
	Brokers []string
	// Duration is how long each steady rate is held. Default 20s.
	Duration time.Duration
	// Rates are the steady loads, rows per second. Default 500, 2000, 5000.
	Rates []int
	// Backlog is the number of rows of the drain test. Default 200,000.
	Backlog int
	// TxSizes are the transaction sizes the backlog is written with. Default 1 and 100.
	TxSizes []int
	// Repeats is how many times each publisher drains each backlog, interleaved; the
	// report gives the median. Default 3.
	Repeats int
	// SteadyRepeats is how many times each publisher runs each steady rate, interleaved in a
	// rotating order; the table gives the medians and every run's figures. On a machine that is
	// not quiet a single run of each is noise (two copies of one build differed 1.5× in CPU and
	// 2.5× in p50 side by side). Default 1.
	SteadyRepeats int
	// Publishers are the publishers compared. Default DefaultPublishers.
	Publishers []Publisher
	// Writers is the number of connections writing the steady load. Default 8.
	Writers int
	// Partitions of each benchmark topic. Default 3.
	Partitions int
	// Warmup is how long each steady rate is written before the measured part (its records
	// are not measured): the JVM's JIT makes Debezium's first seconds of load slower. Default 5s.
	Warmup time.Duration
	// LargeRows is the number of rows of the large-payload drain (1-row transactions of
	// LargePayload bytes of payload each), reported in MB/s. Default 20,000; negative leaves
	// it out.
	LargeRows int
	// LargePayload is the payload size of the large-payload drain, bytes. Default 10,240.
	LargePayload int
	// ReplayRate is the steady rate of the kill -9 test. Default 2,000 rows/s.
	ReplayRate int
	// KillAfter is how long after its first record the publisher is killed -9 in the replay
	// test; the load goes on for as long again after the kill. Default 30s.
	KillAfter time.Duration
	// Profile makes every cdc-relay publisher write a CPU profile of its whole life
	// (CDC_RELAY_CPU_PROFILE) into OutDir/profiles/<its log's name>.pprof.
	Profile bool
	// SkipSteady, SkipBacklog and SkipReplay leave a part of the suite out.
	SkipSteady, SkipBacklog, SkipReplay bool
	// DebeziumHome holds lib/ (the Connect worker) and plugins/ (Debezium), as
	// scripts/debezium-jars.sh makes them. Default: what that script prints (it fetches the
	// jars with Maven if needed).
	DebeziumHome string
	// OutDir receives table.md, report.json, latency-cdf.svg and the publishers' logs.
	// Required.
	OutDir string
	// PGBin is the directory of pg_recvlogical. Default $CDC_RELAY_DEV_PG_BIN, else
	// `pg_config --bindir`.
	PGBin string
	// RelayBin is the cdc-relay binary. Default: built from this module into a temp dir.
	RelayBin string
	// Progress receives one line per phase and a line per second while a phase runs.
	// Default os.Stderr.
	Progress io.Writer
	// DrainTimeout bounds the wait for the last records of a phase. Default 2 minutes.
	DrainTimeout time.Duration
	// Command is the command line, recorded in the report.
	Command string
}

// Quick shortens the suite for a smoke run: 5 s per rate after 2 s of warm-up, a 20,000-row
// backlog and 2,000 10 KB rows drained once per publisher, a kill 5 s after the first record.
func (c Config) Quick() Config {
	c.Duration = 5 * time.Second
	c.Warmup = 2 * time.Second
	c.Backlog = 20_000
	c.LargeRows = 2_000
	c.Repeats = 1
	c.KillAfter = 5 * time.Second
	return c
}

func (c Config) withDefaults() Config {
	if c.PGURL == "" {
		c.PGURL = os.Getenv("CDC_RELAY_PG_URL")
	}
	if len(c.Brokers) == 0 {
		if b := os.Getenv("CDC_RELAY_BROKERS"); b != "" {
			c.Brokers = strings.Split(b, ",")
		}
	}
	orDefault(&c.Duration, 20*time.Second)
	if len(c.Rates) == 0 {
		c.Rates = []int{500, 2000, 5000}
	}
	orDefault(&c.Backlog, 200_000)
	orDefault(&c.Warmup, 5*time.Second)
	orDefault(&c.LargeRows, 20_000)
	orDefault(&c.LargePayload, 10_240)
	orDefault(&c.ReplayRate, 2000)
	orDefault(&c.KillAfter, 30*time.Second)
	orDefault(&c.DebeziumHome, os.Getenv("CDC_RELAY_DEBEZIUM_HOME"))
	if len(c.TxSizes) == 0 {
		c.TxSizes = []int{1, 100}
	}
	if len(c.Publishers) == 0 {
		c.Publishers = DefaultPublishers
	}
	orDefault(&c.Repeats, 3)
	orDefault(&c.SteadyRepeats, 1)
	orDefault(&c.Writers, 8)
	orDefault(&c.Partitions, 3)
	if c.PGBin == "" {
		c.PGBin = os.Getenv("CDC_RELAY_DEV_PG_BIN")
	}
	if c.PGBin == "" {
		if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
			c.PGBin = strings.TrimSpace(string(out))
		}
	}
	if c.Progress == nil {
		c.Progress = os.Stderr
	}
	orDefault(&c.DrainTimeout, 2*time.Minute)
	return c
}

// orDefault sets *v to def when it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// placeErrs are what every command's configuration needs (after defaults) and c lacks: the
// services and the output directory.
func (c Config) placeErrs() []error {
	var errs []error
	const hint = `run: eval "$(scripts/dev-up.sh)"`
	if c.PGURL == "" {
		errs = append(errs, fmt.Errorf("bench: no PostgreSQL URL: set --pg-url or CDC_RELAY_PG_URL (%s)", hint))
	}
	if len(c.Brokers) == 0 {
		errs = append(errs, fmt.Errorf("bench: no Kafka brokers: set --brokers or CDC_RELAY_BROKERS (%s)", hint))
	}
	if c.OutDir == "" {
		errs = append(errs, errors.New("bench: no output directory"))
	}
	return errs
}

// Validate reports a configuration that cannot run (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	errs := c.placeErrs()
	if c.Duration < 0 || c.Backlog < 0 || c.Writers < 0 || c.Repeats < 0 || c.SteadyRepeats < 0 || c.Warmup < 0 || c.ReplayRate < 0 || c.KillAfter < 0 || c.LargePayload < 0 {
		errs = append(errs, errors.New("bench: duration, warm-up, backlog, repeats, steady repeats, writers, replay rate, kill-after and payload size must not be negative"))
	}
	names := map[string]bool{RecvLogical: true}
	for _, p := range c.Publishers {
		if names[p.Name] || p.Name == "" {
			errs = append(errs, fmt.Errorf("bench: publisher name %q is empty or not unique", p.Name))
		}
		names[p.Name] = true
		if p.Debezium {
			for _, a := range p.Args {
				if k, _, ok := strings.Cut(a, "="); !ok || k == "" {
					errs = append(errs, fmt.Errorf("bench: publisher %q: setting %q: want key=value (a connector setting, or worker.key=value for the Connect worker)", p.Name, a))
				}
			}
		}
	}
	for _, r := range c.Rates {
		if r <= 0 {
			errs = append(errs, fmt.Errorf("bench: rate %d: want rows per second > 0", r))
		}
	}
	for _, s := range c.TxSizes {
		if s <= 0 {
			errs = append(errs, fmt.Errorf("bench: transaction size %d: want > 0", s))
		}
	}
	if !c.SkipBacklog {
		if _, err := os.Stat(filepath.Join(c.PGBin, "pg_recvlogical")); err != nil {
			errs = append(errs, fmt.Errorf("bench: pg_recvlogical not found in %q: set --pg-bin or CDC_RELAY_DEV_PG_BIN: %w", c.PGBin, err))
		}
	}
	return errors.Join(errs...)
}
