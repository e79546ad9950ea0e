package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/jackc/pgx/v5"
)

// errHelp is returned when --help was asked for: the usage is printed and the exit is 0.
var errHelp = errors.New("help requested")

// envName is the environment twin of a flag.
func envName(flagName string) string {
	return "CDC_RELAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// newFlagSet makes a flag set whose usage lists each flag with its environment twin.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: cdc-relay %s\n%s", synopsis, flagsHeading)
		fs.VisitAll(func(f *flag.Flag) { printFlag(fs.Output(), f) })
	}
	return fs
}

// parse applies environment twins first, then the command line, so flags win: a twin that
// does not parse is refused (with its value and the form expected) only when the command line
// does not give the flag.
func parse(fs *flag.FlagSet, args []string) error {
	if f := fs.Lookup(helpAllFlag); f != nil && f.Value.(*helpLayout).wanted(args) {
		_ = f.Value.Set("true")
		fs.Usage()
		return errHelp
	}
	checkValues(fs)
	twinErrs := map[string]error{}
	fs.VisitAll(func(f *flag.Flag) {
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok || f.Name == helpAllFlag {
			return
		}
		if _, typed := f.Value.(*checkedValue); typed && strings.TrimSpace(v) == "" {
			twinErrs[f.Name] = fmt.Errorf("environment %s (--%s) is set but empty: unset it for the default (%s), or give a value",
				envName(f.Name), f.Name, f.DefValue)
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			twinErrs[f.Name] = fmt.Errorf("environment %s (--%s): %w", envName(f.Name), f.Name, err)
		}
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return &usageError{fmt.Errorf("%s: %w (see 'cdc-relay %s --help')", fs.Name(), err, fs.Name())}
	}
	fs.Visit(func(f *flag.Flag) { delete(twinErrs, f.Name) }) // given on the command line: it wins
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if err := twinErrs[f.Name]; err != nil {
			errs = append(errs, err)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return &usageError{err}
	}
	if fs.NArg() > 0 {
		return usageErr("%s: unexpected argument %q (see 'cdc-relay %s --help')", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// listFlag is a comma-separated, repeatable list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = nil // an environment twin is replaced, not extended, by the command line
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// common holds the flags every command shares.
type common struct {
	pgURL     string
	slot      string
	logFormat string
	logLevel  string
	pgTimeout time.Duration
	// pgPasswordFile is --pg-password-file; loadPG reads it into pg (secret.go).
	pgPasswordFile string
	// pg is --pg-url parsed once, with the password of --pg-password-file and --pg-timeout
	// applied: every PostgreSQL connection of the command takes a copy.
	pg *pgx.ConnConfig
}

func (c *common) register(fs *flag.FlagSet) {
	c.registerNoSlot(fs)
	fs.StringVar(&c.slot, "slot", "", "logical replication slot name")
}

// registerNoSlot registers the shared flags except --slot, for commands without a slot (poll).
func (c *common) registerNoSlot(fs *flag.FlagSet) {
	fs.StringVar(&c.pgURL, "pg-url", "", "PostgreSQL URL, e.g. postgres://user@host:5432/db (the password is never logged)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&c.pgTimeout, "pg-timeout", 10*time.Second, "how long to wait for PostgreSQL to answer when connecting")
	fs.StringVar(&c.pgPasswordFile, "pg-password-file", "", "file holding the PostgreSQL password (replaces the URL's; keeps it out of process listings)")
}

func (c *common) validate() error {
	var errs []error
	if c.slot == "" {
		errs = append(errs, errors.New("--slot is required (or set CDC_RELAY_SLOT)"))
	}
	return c.validateWith(errs)
}

// validateNoSlot checks the flags registerNoSlot registered.
func (c *common) validateNoSlot() error { return c.validateWith(nil) }

func (c *common) validateWith(errs []error) error {
	if c.pgURL == "" {
		errs = append([]error{errors.New("--pg-url is required (or set CDC_RELAY_PG_URL)")}, errs...)
	} else if err := c.loadPG(); err != nil {
		errs = append(errs, err)
	}
	if c.pgTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--pg-timeout %s: use a positive duration, e.g. 10s", c.pgTimeout))
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: use text or json", c.logFormat))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: use debug, info, warn or error", c.logLevel))
	}
	if err := errors.Join(errs...); err != nil {
		return &usageError{err}
	}
	return nil
}

func (c *common) logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.logLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// registerColumns registers the column-mapping flags of the columns the relay reads, which
// run, poll, cutover and mark-published share.
func registerColumns(fs *flag.FlagSet, c *outbox.Columns) {
	fs.StringVar(&c.ID, "column-id", "id", "outbox id column")
	fs.StringVar(&c.AggregateID, "column-aggregate-id", "aggregate_id", "aggregate id column (the Kafka key)")
	fs.StringVar(&c.Topic, "column-topic", "topic", "topic column")
	fs.StringVar(&c.Payload, "column-payload", "payload", "payload column (the Kafka value)")
	fs.StringVar(&c.EventType, "column-event-type", "event_type", "optional event type column")
	fs.StringVar(&c.Headers, "column-headers", "headers", "optional jsonb headers column")
}

// crashHook reads the test-only environment variable env, a count N, and returns a function that
// kills the process with SIGKILL on its Nth call (nil when env is unset). The fault-injection
// tests use it to stop the process between Kafka's acknowledgement and the bookkeeping after it.
func crashHook(env string, log *slog.Logger, what string) (func(attrs ...any), error) {
	v := os.Getenv(env)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return nil, usageErr("%s=%q: want a positive count", env, v)
	}
	var seen atomic.Int64
	return func(attrs ...any) {
		if seen.Add(1) == int64(n) {
			log.Warn("test hook: killing the process "+what, attrs...)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}, nil
}

// checkRanges refuses, naming the flag, a value that cannot work, at start instead of at the
// first use: a duration or count of positive that is zero or negative (a zero interval is a
// busy loop or no heartbeat at all, a zero timeout fails every attempt), one of nonNegative
// that is negative. Names fs does not have are skipped.
func checkRanges(fs *flag.FlagSet, positive, nonNegative []string) error {
	var errs []error
	sign := func(name string) (int, string, bool) {
		f := fs.Lookup(name)
		if f == nil {
			return 0, "", false
		}
		switch v := f.Value.(flag.Getter).Get().(type) {
		case time.Duration:
			return cmpSign(int64(v)), "a positive duration, e.g. " + f.DefValue, true
		case int:
			return cmpSign(int64(v)), "a positive number", true
		case int64:
			return cmpSign(v), "a positive number", true
		}
		return 0, "", false
	}
	for _, name := range positive {
		if s, want, ok := sign(name); ok && s <= 0 {
			errs = append(errs, fmt.Errorf("--%s %s: use %s", name, fs.Lookup(name).Value, want))
		}
	}
	for _, name := range nonNegative {
		if s, _, ok := sign(name); ok && s < 0 {
			errs = append(errs, fmt.Errorf("--%s %s: must not be negative (0 is the default, %s)", name, fs.Lookup(name).Value, fs.Lookup(name).DefValue))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &usageError{err}
	}
	return nil
}

func cmpSign(v int64) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
