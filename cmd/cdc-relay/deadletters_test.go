package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Bad selections and flags are usage errors (exit 2), said before anything is contacted.
func TestDeadLettersUsage(t *testing.T) {
	for _, f := range []string{"brokers", "from", "all", "id", "since", "until", "dlq-topic", "dead-letter-table"} {
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
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", c.args, code, errOut.String(), c.want)
		}
	}
}
