package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// subcommand is what the subcommands that run a side-by-side comparison (shapes, values,
// shards) parse alike: the services (--pg-url, --brokers, defaults from the environment), the
// results folder (--out) and the relay under test (--relay-bin); -h, stray arguments and a
// configuration that cannot run answered the same way. Each adds its own flags to fs. The
// steps after parse do nothing once one has ended the command: code is then its exit code.
type subcommand struct {
	name    string
	fs      *flag.FlagSet
	stderr  io.Writer
	brokers string
	out     string
	code    int // -1 while the command goes on
}

// newSubcommand starts `cdc-bench NAME`'s flags; usage, when not empty, heads -h's output.
func newSubcommand(name, usage string, pgURL, relayBin *string, stderr io.Writer) *subcommand {
	s := &subcommand{name: name, stderr: stderr, fs: flag.NewFlagSet("cdc-bench "+name, flag.ContinueOnError), code: -1}
	s.fs.SetOutput(stderr)
	s.fs.StringVar(pgURL, "pg-url", os.Getenv("CDC_RELAY_PG_URL"), "PostgreSQL URL (default $CDC_RELAY_PG_URL)")
	s.fs.StringVar(&s.brokers, "brokers", os.Getenv("CDC_RELAY_BROKERS"), "Kafka brokers, comma-separated (default $CDC_RELAY_BROKERS)")
	s.fs.StringVar(&s.out, "out", "results", "results folder: the run goes into <out>/"+name+"-<date>/")
	s.fs.StringVar(relayBin, "relay-bin", "", "cdc-relay binary to benchmark (default: built from this module)")
	if usage != "" {
		s.fs.Usage = func() {
			fmt.Fprint(stderr, usage)
			s.fs.PrintDefaults()
		}
	}
	return s
}

// ok tells whether the command goes on.
func (s *subcommand) ok() bool { return s.code < 0 }

// parse parses args: -h ends the command with 0, a bad flag or a stray argument with 2.
func (s *subcommand) parse(args []string) {
	if err := s.fs.Parse(args); err != nil {
		s.code = 2
		if errors.Is(err, flag.ErrHelp) {
			s.code = 0
		}
		return
	}
	if s.fs.NArg() > 0 {
		s.fail("unexpected argument %q (every setting is a --flag)", s.fs.Arg(0))
	}
}

// positive refuses the first flag (by name) whose value is not above 0.
func (s *subcommand) positive(flags map[string]int) {
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if v := flags[name]; s.ok() && v <= 0 {
			s.fail("--%s %d: want a positive number", name, v)
		}
	}
}

// finish fills in what the flags give every configuration: the brokers and this run's
// folder under --out.
func (s *subcommand) finish(brokers *[]string, outDir *string) {
	if !s.ok() {
		return
	}
	if s.brokers != "" {
		*brokers = strings.Split(s.brokers, ",")
	}
	*outDir = filepath.Join(s.out, s.name+"-"+time.Now().UTC().Format("2006-01-02T150405Z"))
}

// check refuses a configuration that validate (its Validate, taken once it is complete)
// finds unable to run.
func (s *subcommand) check(validate func() error) {
	if !s.ok() {
		return
	}
	if err := validate(); err != nil {
		s.fail("%v", err)
	}
}

// command is the command line as the report quotes it.
func (s *subcommand) command(args []string) string {
	return strings.Join(append([]string{"cdc-bench", s.name}, args...), " ")
}

// fail says what is wrong, prefixed by the subcommand's name, and ends the command with
// exit code 2 (bad usage).
func (s *subcommand) fail(format string, a ...any) {
	fmt.Fprintf(s.stderr, "cdc-bench %s: %s\n", s.name, fmt.Sprintf(format, a...))
	s.code = 2
}
