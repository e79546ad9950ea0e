package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// Bad configuration ends `cdc-relay run` within seconds, never a hang: exit 2 for what the
// operator must fix in the command or the database setup, exit 1 for a service that cannot be
// reached, and a message on stderr that says what to fix.
func TestRunConfigurationErrorsExitFastWithAFix(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	pg := testenv.PGURL(t)
	brokers := strings.Join(testenv.Brokers(t), ",")
	closed := testenv.FreePort(t)
	other := e.F.Table + "_other"
	if _, err := e.F.Pool.Exec(context.Background(), `CREATE TABLE `+other+` (id bigserial primary key)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.F.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+other) })
	// A server of the test's own with wal_level = replica: the shared one must stay logical.
	replica := testenv.TempPostgres(t, "wal_level = replica")

	base := []string{"run", "--pg-url", pg, "--brokers", brokers, "--slot", e.F.Slot, "--publication", e.F.Publication}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	cases := []struct {
		name string
		args []string
		env  []string
		code int
		want []string
	}{
		{"unknown flag", with("--bogus"), nil, 2, []string{"flag provided but not defined: -bogus", "cdc-relay run --help"}},
		{"unknown command", []string{"runn"}, nil, 2, []string{`unknown command "runn"`}},
		{"missing brokers", []string{"run", "--pg-url", pg, "--slot", e.F.Slot, "--publication", e.F.Publication}, []string{"CDC_RELAY_BROKERS="}, 2,
			[]string{"--brokers is required", "CDC_RELAY_BROKERS"}},
		{"invalid slot name", with("--slot", "Bad-Name"), nil, 2, []string{"Bad-Name"}},
		{"malformed URL", with("--pg-url", "postgres://%zz@localhost/db"), nil, 2, []string{"bad --pg-url"}},
		{"Postgres unreachable", with("--pg-url", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/cdc", closed)), nil, 1,
			[]string{fmt.Sprintf("connect to PostgreSQL at 127.0.0.1:%d", closed), "connection refused", "check that the server runs"}},
		{"Postgres not answering", with("--pg-url", "postgres://postgres@10.255.255.1:5432/cdc", "--pg-timeout", "2s"), nil, 1,
			[]string{"connect to PostgreSQL at 10.255.255.1:5432", "check that the server runs"}},
		{"Kafka unreachable", with("--brokers", fmt.Sprintf("127.0.0.1:%d", closed), "--kafka-timeout", "3s"), nil, 1,
			[]string{"Kafka is unreachable", fmt.Sprintf("127.0.0.1:%d", closed), "check that the broker runs"}},
		{"wal_level not logical", with("--pg-url", replica), nil, 2, []string{"wal_level", "replica", "set wal_level = logical", "restart PostgreSQL"}},
		{"missing publication", with("--publication", "no_such_pub"), nil, 2,
			[]string{`publication "no_such_pub"`, "does not exist", "cdc-relay slot create"}},
		{"missing slot", with("--slot", "no_such_slot"), nil, 2,
			[]string{`slot "no_such_slot"`, "does not exist", "cdc-relay slot create --slot no_such_slot"}},
		{"table not in the publication", with("--table", other), nil, 2,
			[]string{"--table " + other + " is not in publication " + e.F.Publication, "ALTER PUBLICATION"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			_, stderr, code := testenv.Run(t, 30*time.Second, e.Bin, c.env, c.args...)
			took := time.Since(began)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			last := lastLine(stderr)
			for _, w := range c.want {
				if !strings.Contains(last, w) {
					t.Errorf("message %q lacks %q", last, w)
				}
			}
			if took > 15*time.Second {
				t.Errorf("took %s to fail", took.Round(time.Millisecond))
			}
			t.Logf("exit %d after %s: %s", code, took.Round(time.Millisecond), last)
		})
	}
}

// lastLine returns the final non-empty line of s (where the CLI prints its error).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	// An error may span lines (pgconn lists every address it tried): take the "cdc-relay:" line on.
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "cdc-relay: ") {
			return strings.Join(lines[i:], "\n")
		}
	}
	return lines[len(lines)-1]
}
