package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `cdc-relay publishes transactional-outbox rows from PostgreSQL to Kafka by
reading the write-ahead log (logical replication, pgoutput).

Usage:
  cdc-relay slot create --pg-url URL --slot NAME --publication NAME [--table public.outbox]
  cdc-relay slot status --pg-url URL --slot NAME [--publication NAME] [--json]
  cdc-relay slot drop   --pg-url URL --slot NAME [--publication NAME]
  cdc-relay slot reshard --pg-url URL --slot NAME --publication NAME --shards M [--from N]
  cdc-relay run         --pg-url URL --brokers HOST:PORT[,..] --slot NAME --publication NAME [--metrics-addr ADDR]
  cdc-relay poll        --pg-url URL --brokers HOST:PORT[,..] [--table public.outbox] [--interval 100ms] [--batch 100]
  cdc-relay poll --create-index --pg-url URL [--table public.outbox]
  cdc-relay outbox prune --pg-url URL --older-than 168h [--mode run|poll] [--slot NAME] [--table public.outbox] [--batch 1000]
  cdc-relay cutover     --pg-url URL --brokers HOST:PORT[,..] --slot NAME --publication NAME [--table public.outbox]
  cdc-relay outbox mark-published --pg-url URL --slot NAME --publication NAME [--table public.outbox]
  cdc-relay dead-letters list|show ID|replay|discard --pg-url URL [--from topic|table] [--brokers HOST:PORT[,..]]
      [--id ID] [--topic T] [--reason TEXT] [--since T] [--until T] [--all] [--dry-run]

'run' reads the WAL; 'poll' is the polling publisher it replaces (SELECT ... FOR UPDATE SKIP
LOCKED on published_at IS NULL), for comparison and for republishing rows a lost slot missed.

Every flag has an environment twin: CDC_RELAY_<FLAG>, upper case, dashes as underscores
(--pg-url is CDC_RELAY_PG_URL). A flag on the command line wins over its twin.
Run 'cdc-relay COMMAND --help' for a command's flags ('cdc-relay run --help-all' adds run's tuning flags).

Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad usage or configuration.
`

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// usageError marks a failure caused by how the program was called or configured (exit 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

func main() {
	stop, err := startCPUProfile(os.Getenv(cpuProfileEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "cdc-relay: %v\n", err)
		os.Exit(exitUsage)
	}
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "cdc-relay: %s: %v\n", cpuProfileEnv, err)
	}
	os.Exit(code)
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runCtx(ctx, args, stdout, stderr)
}

// runCtx runs the command until ctx ends and returns its exit code.
func runCtx(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, new(*usageError)):
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitRuntime
	}
}

// command runs a command, given the arguments after its name.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// commands are cdc-relay's commands by name.
var commands = map[string]command{
	"run":          cmdRun,
	"poll":         cmdPoll,
	"outbox":       cmdOutbox,
	"cutover":      cmdCutover,
	"dead-letters": cmdDeadLetters,
	"slot":         cmdSlot,
}

// slotCommands are slot's subcommands by name.
var slotCommands = map[string]command{
	"create":  cmdSlotCreate,
	"status":  cmdSlotStatus,
	"drop":    cmdSlotDrop,
	"reshard": cmdSlotReshard,
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runCommand(ctx, commands, args, stdout, stderr, usageErr("no command given"), func(name string) error {
		fmt.Fprint(stderr, usage)
		return usageErr("unknown command %q", name)
	})
}

func cmdSlot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runCommand(ctx, slotCommands, args, stdout, stderr, usageErr("slot needs a subcommand: create, status, drop or reshard"), func(name string) error {
		return usageErr("unknown slot subcommand %q: use create, status, drop or reshard", name)
	})
}

// runCommand runs the command of table that args[0] names with the arguments after it, or
// prints the usage for help. With no args it prints the usage to stderr and returns none; a
// name table lacks is unknown's error.
func runCommand(ctx context.Context, table map[string]command, args []string, stdout, stderr io.Writer, none error, unknown func(name string) error) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return none
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	cmd, ok := table[args[0]]
	if !ok {
		return unknown(args[0])
	}
	return cmd(ctx, args[1:], stdout, stderr)
}

// isHelp reports whether arg asks for the usage.
func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "help" }
