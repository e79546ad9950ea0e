package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// --format and --ce-source are checked before anything is contacted: a bad value is a usage
// error (exit 2) on run, poll and cutover alike.
func TestFormatFlags(t *testing.T) {
	base := map[string][]string{
		"run":     {"--pg-url", "postgres://u@127.0.0.1:1/app", "--slot", "s", "--publication", "p", "--brokers", "127.0.0.1:1"},
		"poll":    {"--pg-url", "postgres://u@127.0.0.1:1/app", "--brokers", "127.0.0.1:1"},
		"cutover": {"--pg-url", "postgres://u@127.0.0.1:1/app", "--slot", "s", "--publication", "p", "--brokers", "127.0.0.1:1"},
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) error{"run": cmdRun, "poll": cmdPoll, "cutover": cmdCutover}
	for name, cmd := range cmds {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--format", "json"}, `--format "json": use outbox or cloudevents`},
			{[]string{"--ce-source", "/x"}, "--ce-source is for --format cloudevents only"},
			{[]string{"--format", "cloudevents", "--ce-source", "%zz"}, "not a URI reference"},
		} {
			err := cmd(context.Background(), append(append([]string{}, base[name]...), c.args...), io.Discard, io.Discard)
			if err == nil || !errors.As(err, new(*usageError)) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %q: %v, want a usage error with %q", name, c.args, err, c.want)
			}
		}
	}
}
