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
}

// DefaultPublishers are the relay and the poller at 100ms and at 10ms.
var DefaultPublishers = []Publisher{
	{Name: "run"},
	{Name: "poll 100ms", Poll: true, Interval: 100 * time.Millisecond},
	{Name: "poll 10ms", Poll: true, Interval: 10 * time.Millisecond},
}

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
	// Publishers are the publishers compared. Default DefaultPublishers.
	Publishers []Publisher
	// Writers is the number of connections writing the steady load. Default 8.
	Writers int
	// Partitions of each benchmark topic. Default 3.
	Partitions int
	// SkipSteady and SkipBacklog leave a part of the suite out.
	SkipSteady, SkipBacklog bool
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

// Quick shortens the suite for a smoke run: 5 s per rate and a 20,000-row backlog drained
// once per publisher.
func (c Config) Quick() Config {
	c.Duration = 5 * time.Second
	c.Backlog = 20_000
	c.Repeats = 1
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
	if c.Duration == 0 {
		c.Duration = 20 * time.Second
	}
	if len(c.Rates) == 0 {
		c.Rates = []int{500, 2000, 5000}
	}
	if c.Backlog == 0 {
		c.Backlog = 200_000
	}
	if len(c.TxSizes) == 0 {
		c.TxSizes = []int{1, 100}
	}
	if len(c.Publishers) == 0 {
		c.Publishers = DefaultPublishers
	}
	if c.Repeats == 0 {
		c.Repeats = 3
	}
	if c.Writers == 0 {
		c.Writers = 8
	}
	if c.Partitions == 0 {
		c.Partitions = 3
	}
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
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 2 * time.Minute
	}
	return c
}

// Validate reports a configuration that cannot run (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
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
	if c.Duration < 0 || c.Backlog < 0 || c.Writers < 0 || c.Repeats < 0 {
		errs = append(errs, errors.New("bench: duration, backlog, repeats and writers must not be negative"))
	}
	names := map[string]bool{RecvLogical: true}
	for _, p := range c.Publishers {
		if names[p.Name] || p.Name == "" {
			errs = append(errs, fmt.Errorf("bench: publisher name %q is empty or not unique", p.Name))
		}
		names[p.Name] = true
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
