package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// runBad runs cdc-relay with args and env (NAME=VALUE) and returns its exit code and stderr.
func runBad(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	for _, twin := range []string{"CDC_RELAY_PG_URL", "CDC_RELAY_BROKERS", "CDC_RELAY_SLOT", "CDC_RELAY_PUBLICATION"} {
		t.Setenv(twin, "") // the services' variables of the test run are not the command's
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	// A bad value that slipped through would wait for the services: the deadline ends that
	// wait (exit 0, a stop during startup), and the test fails on the exit code.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := runCtx(ctx, args, &stdout, &stderr)
	return code, stderr.String()
}

// Every bad value is refused at start (exit 2), before any connection, with the flag or its
// environment twin, the value, and the form expected; none is accepted silently.
func TestBadInputIsRefusedWithTheFormExpected(t *testing.T) {
	closed := fmt.Sprintf("postgres://u@127.0.0.1:%d/db", testenv.FreePort(t))
	runArgs := func(extra ...string) []string {
		return append([]string{"run", "--pg-url", closed, "--slot", "s", "--publication", "p", "--brokers", "127.0.0.1:1", "--metrics-addr", ""}, extra...)
	}
	cases := []struct {
		name   string
		env    []string
		args   []string
		want   []string
		reject []string
	}{
		{"twin duration without form", []string{"CDC_RELAY_LINGER=abc"}, runArgs(),
			[]string{"CDC_RELAY_LINGER", "--linger", `"abc"`, "500ms", "7d"}, []string{"parse error"}},
		{"twin set but empty", []string{"CDC_RELAY_MAX_BUFFERED_BYTES="}, runArgs(),
			[]string{"CDC_RELAY_MAX_BUFFERED_BYTES", "set but empty", "33554432"}, []string{"parse error"}},
		{"duration without a unit", nil, runArgs("--linger", "10"), []string{"-linger", `"10"`, "no unit", "10s"}, []string{"parse error"}},
		{"receive timeout without a unit", nil, runArgs("--receive-timeout", "10"), []string{"-receive-timeout", "no unit"}, nil},
		{"count with an exponent", nil, runArgs("--max-buffered-records", "1e12"), []string{"-max-buffered-records", `"1e12"`, "whole number", "10000"}, []string{"parse error"}},
		{"URL with an unencoded password", nil, []string{"run", "--pg-url", "postgres://u:pa@ss#1@127.0.0.1/db", "--slot", "s"},
			[]string{"--pg-url", "percent-encoded", "%40", "%23", "--pg-password-file"}, []string{"pa@ss", "ss#1"}},
		{"JDBC URL", nil, []string{"run", "--pg-url", "jdbc:postgresql://host:5432/db", "--slot", "s"},
			[]string{"--pg-url is a JDBC URL", "postgresql://host:5432/db"}, nil},
		{"URL without a scheme", nil, []string{"run", "--pg-url", "localhost:5432/cdc", "--slot", "s"},
			[]string{"--pg-url localhost:5432/cdc", "postgres://USER@localhost:5432/cdc"}, []string{"failed to parse as keyword/value"}},
		{"URL without a scheme hides the password", nil, []string{"run", "--pg-url", "u:secretpw@localhost:5432/cdc", "--slot", "s"},
			[]string{"postgres://USER@localhost:5432/cdc"}, []string{"secretpw"}},
		{"another scheme", nil, []string{"run", "--pg-url", "mysql://h/db", "--slot", "s"}, []string{`scheme "mysql"`, "postgres://"}, nil},
		{"broker with a listener's scheme", nil, append(runArgs(), "--brokers", "PLAINTEXT://host:9092"),
			[]string{"--brokers PLAINTEXT://host:9092", "use host:9092"}, nil},
		{"broker port not a number", nil, append(runArgs(), "--brokers", "host:kafka"), []string{"--brokers host:kafka", "host:port"}, nil},
		{"column-topic with topic", nil, runArgs("--topic", "orders", "--column-topic", "dest"),
			[]string{"--column-topic dest and --topic orders", "give one of them"}, nil},
		{"transactional id with spaces", nil, runArgs("--delivery", "exactly-once", "--transactional-id", "orders relay "),
			[]string{`--transactional-id "orders relay "`, "orders-relay"}, nil},
		{"metrics address not host:port", nil, append(runArgs(), "--metrics-addr", "9188"), []string{`--metrics-addr "9188"`, ":9188"}, nil},
		{"prune age without a unit", nil, []string{"outbox", "prune", "--pg-url", closed, "--older-than", "7"},
			[]string{"-older-than", "no unit", "7d"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			code, stderr := runBad(t, c.env, c.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			last := stderr[strings.LastIndex(strings.TrimRight(stderr, "\n"), "\n")+1:] // the error, after any usage
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, last)
				}
			}
			for _, r := range c.reject {
				if strings.Contains(stderr, r) {
					t.Errorf("stderr has %q:\n%s", r, last)
				}
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("took %s: refused at start, before any connection, it should be at once", took)
			}
		})
	}
}

// A twin that does not parse does not block the start when the command line gives the flag:
// the flag wins, as over a twin that parses.
func TestFlagOverridesABadTwin(t *testing.T) {
	code, stderr := runBad(t, []string{"CDC_RELAY_LINGER=abc", "CDC_RELAY_MAX_BUFFERED_BYTES="},
		"run", "--pg-url", "postgres://u@127.0.0.1:1/db", "--linger", "5ms", "--max-buffered-bytes", "1024")
	if code != exitUsage || !strings.Contains(stderr, "--slot is required") || strings.Contains(stderr, "CDC_RELAY_LINGER") ||
		strings.Contains(stderr, "CDC_RELAY_MAX_BUFFERED_BYTES") {
		t.Errorf("exit %d, stderr:\n%s\nwant only the missing --slot: the flags override their twins", code, stderr)
	}
}

// Every duration flag takes days, as dead-letters --since does; a number without a unit is
// refused, never read as nanoseconds.
func TestDurationsTakeDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "10s": 10 * time.Second,
		"0": 0, "-1s": -time.Second, "-2d": -48 * time.Hour, "1.5h": 90 * time.Minute} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"10", "1.5", "d", "7dd", "abc", "", "1d-2h"} {
		if got, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) = %s, want an error", in, got)
		}
	}
	code, stderr := runBad(t, nil, "outbox", "prune", "--pg-url", "postgres://u@127.0.0.1:1/db", "--pg-timeout", "1s", "--older-than", "7d")
	if strings.Contains(stderr, "older-than") {
		t.Errorf("outbox prune --older-than 7d: exit %d, refused:\n%s", code, stderr)
	}
}

// A producer buffer larger than the memory the process may use is refused (it would never
// pause reading before running out of memory).
func TestBufferedBytesAboveMemoryAreRefused(t *testing.T) {
	if err := checkBufferedBytes(1<<40, 24<<30); err == nil || !strings.Contains(err.Error(), "1.0 TiB") || !strings.Contains(err.Error(), "24.0 GiB") {
		t.Errorf("1 TiB on 24 GiB: %v, want a refusal naming both", err)
	}
	if err := checkBufferedBytes(32<<20, 24<<30); err != nil {
		t.Errorf("the default on 24 GiB: %v", err)
	}
	if err := checkBufferedBytes(1<<40, 0); err != nil {
		t.Errorf("with the memory unknown: %v, want no check", err)
	}
	if limit := memoryLimit(); limit > 0 && limit < 1<<40 {
		code, stderr := runBad(t, nil, "run", "--pg-url", "postgres://u@127.0.0.1:1/db", "--slot", "s", "--publication", "p",
			"--brokers", "127.0.0.1:1", "--metrics-addr", "", "--max-buffered-bytes", "1099511627776")
		if code != exitUsage || !strings.Contains(stderr, "--max-buffered-bytes 1099511627776") {
			t.Errorf("run --max-buffered-bytes 1TiB: exit %d\n%s", code, stderr)
		}
	}
}

// --brokers naming PostgreSQL's port stops the start (exit 2) naming what answers there,
// instead of waiting for good for a Kafka that is not there; a port where nothing listens is
// still waited for (the e2e TestRunWaitsForServicesItCannotReach).
func TestBrokersAtAPostgreSQLPortStopTheStart(t *testing.T) {
	cfg := testenv.PGConfig(t)
	pgAddr, pgURL := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port), testenv.PGURL(t)
	// Names of the test's own: without the check, cutover would create its slot and publication.
	name := testenv.Name(t)
	t.Cleanup(func() {
		conn, err := pgx.ConnectConfig(context.Background(), cfg)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, name)
		_, _ = conn.Exec(context.Background(), `DROP PUBLICATION IF EXISTS `+name)
	})
	for _, cmd := range [][]string{
		{"run", "--slot", name, "--publication", name, "--metrics-addr", ""},
		{"poll", "--metrics-addr", ""},
		{"cutover", "--slot", name, "--publication", name},
	} {
		args := append(append([]string{}, cmd...), "--pg-url", pgURL, "--brokers", pgAddr)
		code, stderr := runBad(t, nil, args...)
		if code != exitUsage || !strings.Contains(stderr, "--brokers "+pgAddr) || !strings.Contains(stderr, "PostgreSQL server") ||
			!strings.Contains(stderr, "not Kafka") {
			t.Errorf("%s --brokers %s: exit %d, want %d naming the broker and PostgreSQL:\n%s", cmd[0], pgAddr, code, exitUsage, stderr)
		}
	}
}

// What proves a broker is not Kafka, from franz-go's errors; a TLS listener spoken to in
// plaintext is Kafka (the sink says to set --kafka-tls), and an unreachable one is waited for.
func TestNotKafkaFromTheAnswer(t *testing.T) {
	for msg, want := range map[string]string{
		"invalid large response size 1157627904 > limit 104857600: response exceeds BrokerMaxReadBytes":                    "PostgreSQL",
		"invalid large response size 1213486160 > limit 104857600; the four size bytes are 'HTTP' in ascii, the beginning": "HTTP server",
		"invalid large response size 352518912 > limit 104857600; the first three bytes received appear to be a tls alert": "",
		"dial tcp 127.0.0.1:1: connect: connection refused":                                                                "",
	} {
		err := notKafka("h:1", errors.New(msg))
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", msg, err, want)
		}
	}
}
