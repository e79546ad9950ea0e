package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Bad selections and flags are usage errors (exit 2), said before anything is contacted.
func TestDeadLettersUsage(t *testing.T) {
	for _, f := range []string{"brokers", "from", "all", "id", "since", "until", "dlq-topic", "dead-letter-table", "compression"} {
		t.Setenv(envName(f), "") // restored at the end
		_ = os.Unsetenv(envName(f))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dead-letters"}, "needs a subcommand"},
		{[]string{"dead-letters", "resend"}, "unknown dead-letters subcommand"},
		{[]string{"dead-letters", "replay", "--pg-url", "postgres://h/db", "--brokers", "b:9092"}, "or give --all"},
		{[]string{"dead-letters", "discard", "--pg-url", "postgres://h/db", "--brokers", "b:9092", "--dry-run"}, "or give --all"},
		{[]string{"dead-letters", "list", "--pg-url", "postgres://h/db", "--brokers", "b:9092", "--from", "file"}, `--from "file"`},
		{[]string{"dead-letters", "list", "--pg-url", "postgres://h/db"}, "--brokers is required"},
		{[]string{"dead-letters", "list", "--pg-url", "postgres://h/db", "--brokers", "b:9092", "--id", "17"}, "PARTITION:OFFSET"},
		{[]string{"dead-letters", "list", "--pg-url", "postgres://h/db", "--from", "table", "--id", "0:17"}, "row id"},
		{[]string{"dead-letters", "list", "--pg-url", "postgres://h/db", "--from", "table", "--since", "soon"}, "--since"},
		{[]string{"dead-letters", "list", "--pg-url", "postgres://h/db", "--from", "table", "--since", "1h", "--until", "2h"}, "is not before"},
		{[]string{"dead-letters", "show", "--pg-url", "postgres://h/db", "--from", "table"}, "needs a letter id"},
		{[]string{"dead-letters", "replay", "--pg-url", "postgres://h/db", "--from", "table", "--all"}, "--brokers is required"},
		{[]string{"dead-letters", "replay", "--pg-url", "postgres://h/db", "--from", "table", "--all", "--brokers", "SSL://b:9093"}, "use b:9093"},
		{[]string{"dead-letters", "replay", "--pg-url", "postgres://h/db", "--from", "table", "--all", "--brokers", "b:9092", "--compression", "brotli"},
			`--compression "brotli": use none, gzip, snappy, lz4 or zstd`},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", c.args, code, errOut.String(), c.want)
		}
	}
}

// run, poll and dead-letters replay (which sends letters again, as run sent them) take
// --compression with one default.
func TestRunPollAndReplayShareTheCompressionDefault(t *testing.T) {
	t.Setenv(envName("compression"), "")
	_ = os.Unsetenv(envName("compression"))
	for _, args := range [][]string{{"run", "--help-all"}, {"poll", "--help-all"}, {"dead-letters", "replay", "--help"}} {
		var out, errOut bytes.Buffer
		run(args, &out, &errOut)
		help := out.String() + errOut.String()
		_, rest, ok := strings.Cut(help, "--compression [")
		line, _, _ := strings.Cut(rest, "\n  --")
		if !ok || !strings.Contains(line, "(default "+defaultCompression+")") {
			t.Errorf("%v: --compression's help %q does not say the default %s", args, line, defaultCompression)
		}
	}
}
