package e2e

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Bad configuration ends `cdc-relay run` within seconds, never a hang: exit 2 for what the
// operator must fix in the command or the database setup, and a message on stderr that says
// what to fix. A service that cannot be reached is waited for instead
// (TestRunWaitsForServicesItCannotReach).
func TestRunConfigurationErrorsExitFastWithAFix(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	pg := testenv.PGURL(t)
	brokers := strings.Join(testenv.Brokers(t), ",")
	other := tableOfItsOwn(t, e.F, "_other", `(id bigserial primary key)`)
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
		{"wal_level not logical", with("--pg-url", replica), nil, 2, []string{"wal_level", "replica", "set wal_level = logical", "restart PostgreSQL"}},
		{"missing publication", with("--publication", "no_such_pub"), nil, 2,
			[]string{`publication "no_such_pub"`, "does not exist", "cdc-relay slot create"}},
		{"missing slot", with("--slot", "no_such_slot"), nil, 2,
			[]string{`slot "no_such_slot"`, "does not exist", "cdc-relay slot create --slot no_such_slot"}},
		{"table not in the publication", with("--table", other), nil, 2,
			[]string{"--table " + other + " is not in publication " + e.F.Publication, "ALTER PUBLICATION"}},
		// Accepted silently once, then found row by row (or never): each is refused at start.
		{"dead-letter topic not a Kafka topic name", with("--dlq-topic", "bad!topic"), nil, 2,
			[]string{"--dlq-topic", `"bad!topic"`, "ASCII letters, digits"}},
		{"fixed topic not a Kafka topic name", with("--topic", "a b"), nil, 2, []string{"--topic", `"a b"`}},
		{"a column no streamed table has", with("--column-id", "nosuchcol"), nil, 2,
			[]string{"--column-id nosuchcol", e.F.Table, "every row would be dead-lettered", "aggregate_id"}},
		{"an optional column given that no table has", with("--column-headers", "hdrs"), nil, 2, []string{"--column-headers hdrs"}},
		{"zero status interval", with("--status-interval", "0s"), nil, 2, []string{"--status-interval 0s", "positive duration"}},
		{"zero slot status interval", with("--slot-status-interval", "0s"), nil, 2, []string{"--slot-status-interval 0s", "positive duration"}},
		{"negative linger", with("--linger", "-1s"), nil, 2, []string{"--linger -1s", "must not be negative"}},
		{"zero Kafka timeout", with("--kafka-timeout", "0s"), nil, 2, []string{"--kafka-timeout 0s"}},
		{"zero shutdown timeout", with("--shutdown-timeout", "0s"), nil, 2, []string{"--shutdown-timeout 0s"}},
		{"zero PostgreSQL timeout", with("--pg-timeout", "0s"), nil, 2, []string{"--pg-timeout 0s"}},
		{"zero buffered records", with("--max-buffered-records", "0"), nil, 2, []string{"--max-buffered-records 0", "positive number"}},
		{"batch max bytes out of range", with("--batch-max-bytes", "100"), nil, 2, []string{"--batch-max-bytes 100", "512 to"}},
		{"zero topic partitions", with("--create-topics", "--topic-partitions", "0"), nil, 2, []string{"--topic-partitions 0"}},
		{"partitions without --create-topics", with("--topic-partitions", "3"), nil, 2, []string{"add --create-topics"}},
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

// A relay (re)started while PostgreSQL or Kafka cannot be reached waits for it, saying at each
// cycle what it waits for and why, instead of exiting into its supervisor's growing back-off;
// SIGTERM then ends it cleanly. A server that accepts and never answers is waited for the same
// way, each attempt bounded by --pg-timeout.
func TestRunWaitsForServicesItCannotReach(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	closed := testenv.FreePort(t)
	silent := silentListener(t)
	base := []string{"--pg-url", testenv.PGURL(t), "--brokers", strings.Join(testenv.Brokers(t), ",")}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"Postgres unreachable", []string{"--pg-url", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/cdc", closed)},
			[]string{"waiting for PostgreSQL", fmt.Sprintf("connect to PostgreSQL at 127.0.0.1:%d", closed), "connection refused", "check that the server runs"}},
		{"Postgres not answering", []string{"--pg-url", "postgres://postgres@" + silent + "/cdc", "--pg-timeout", "1s"},
			[]string{"waiting for PostgreSQL", "connect to PostgreSQL at " + silent, "check that the server runs"}},
		{"Kafka unreachable", []string{"--brokers", fmt.Sprintf("127.0.0.1:%d", closed), "--kafka-timeout", "1s"},
			[]string{"waiting for Kafka", fmt.Sprintf("Kafka is unreachable at [127.0.0.1:%d]", closed), "check that the broker runs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := e.Start(t, nil, append(append([]string{}, base...), c.args...)...)
			testenv.Eventually(t, 30*time.Second, "two warnings of the wait", func() bool {
				return strings.Count(p.Output(), c.want[0]) >= 2
			})
			if p.Exited() {
				t.Fatalf("the relay exited while it should wait")
			}
			out := p.Output()
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if code := p.Stop(t); code != 0 {
				t.Errorf("SIGTERM while waiting: exit %d, want 0", code)
			}
			if t.Failed() {
				t.Logf("output:\n%s", p.Output())
			}
		})
	}
}

// silentListener accepts connections on 127.0.0.1 and never answers: a server that hangs.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}
