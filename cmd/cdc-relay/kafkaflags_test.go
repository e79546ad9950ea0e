package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/testkit/proc"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

const testSecret = "s3cr3t-value-that-must-not-leak"

// writeFile writes content to a new file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// selfSigned writes a self-signed certificate and its key as PEM files.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	return testenv.SelfSignedCA(t, dir, "test")
}

// parseKafka registers the group on a fresh flag set and parses args (no environment).
func parseKafka(t *testing.T, args ...string) *kafkaSecurity {
	t.Helper()
	var k kafkaSecurity
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	k.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return &k
}

func TestKafkaSecurityOpts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	pwFile := writeFile(t, dir, "pw", testSecret+"\n")
	cases := []struct {
		name string
		args []string
		opts int // options returned: TLS and SASL count one each
	}{
		{"none", nil, 0},
		{"tls with system roots", []string{"--kafka-tls"}, 1},
		{"ca file implies tls", []string{"--kafka-ca-file", cert}, 1},
		{"mutual tls", []string{"--kafka-ca-file", cert, "--kafka-cert-file", cert, "--kafka-key-file", key}, 1},
		{"insecure", []string{"--kafka-tls", "--kafka-tls-insecure-skip-verify"}, 1},
		{"scram-sha-256 without tls", []string{"--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-user", "u", "--kafka-password-file", pwFile}, 1},
		{"scram-sha-512 lower case", []string{"--kafka-tls", "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-user", "u", "--kafka-password", testSecret}, 2},
		{"plain over tls", []string{"--kafka-tls", "--kafka-sasl-mechanism", "PLAIN", "--kafka-user", "u", "--kafka-password-file", pwFile}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := parseKafka(t, tc.args...)
			o, err := k.opts()
			if err != nil {
				t.Fatalf("opts: %v", err)
			}
			if len(o) != tc.opts {
				t.Errorf("got %d options, want %d", len(o), tc.opts)
			}
		})
	}
}

func TestKafkaSecurityErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, _ := selfSigned(t, dir)
	pwFile := writeFile(t, dir, "pw", testSecret)
	empty := writeFile(t, dir, "empty", "\n")
	twoLines := writeFile(t, dir, "two", testSecret+"\nmore\n")
	notPEM := writeFile(t, dir, "ca.txt", testSecret)
	missing := filepath.Join(dir, "missing")
	scram := []string{"--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-user", "u"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"plain without tls", []string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-user", "u", "--kafka-password", testSecret}, "needs --kafka-tls"},
		{"unknown mechanism", []string{"--kafka-sasl-mechanism", "GSSAPI", "--kafka-user", "u", "--kafka-password", testSecret}, `"GSSAPI": use PLAIN`},
		{"mechanism without user", []string{"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-password", testSecret}, "needs --kafka-user"},
		{"mechanism without password", scram, "needs --kafka-password-file"},
		{"password twice", append(scram[:4:4], "--kafka-password", testSecret, "--kafka-password-file", pwFile), "both given"},
		{"empty password file", append(scram[:4:4], "--kafka-password-file", empty), "is empty"},
		{"password file with two lines", append(scram[:4:4], "--kafka-password-file", twoLines), "more than one line"},
		{"missing password file", append(scram[:4:4], "--kafka-password-file", missing), "--kafka-password-file " + missing},
		{"user without mechanism", []string{"--kafka-user", "u", "--kafka-password", testSecret}, "need --kafka-sasl-mechanism"},
		{"cert without key", []string{"--kafka-cert-file", cert}, "needs --kafka-key-file"},
		{"key without cert", []string{"--kafka-key-file", cert}, "needs --kafka-cert-file"},
		{"ca file missing", []string{"--kafka-ca-file", missing}, "--kafka-ca-file"},
		{"ca file not PEM", []string{"--kafka-ca-file", notPEM}, "no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := parseKafka(t, tc.args...)
			_, err := k.opts()
			if err == nil {
				t.Fatal("opts: no error")
			}
			if !errors.As(err, new(*usageError)) {
				t.Errorf("error %q is not a usage error (exit 2)", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("error %q contains the secret", err)
			}
			if strings.Contains(err.Error(), "Security.") {
				t.Errorf("error %q names a field of sink.Security, not its flag", err)
			}
		})
	}
}

// Every field of sink.Security has its flag in kafkaFlagNames, so that no error of sink
// reaches the user with a Go field name in it.
func TestKafkaFlagNamesCoverSecurity(t *testing.T) {
	t.Parallel()
	for _, f := range reflect.VisibleFields(reflect.TypeFor[sink.Security]()) {
		name := "Security." + f.Name
		if got := kafkaFlagNames.Replace(name); strings.Contains(got, "Security.") {
			t.Errorf("%s has no flag in kafkaFlagNames (got %q)", name, got)
		}
	}
}

// TestKafkaLoggerSaysWhy checks that franz-go's reasons for a failed connection reach the
// relay's log: every retry of an unreachable broker is logged with its cause.
func TestKafkaLoggerSaysWhy(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var buf proc.Buffer
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kafkaLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("Ping of a closed port succeeded")
	}
	out := buf.String()
	for _, w := range []string{"level=WARN", "unable to open connection to broker", "component=kafka", "addr=" + addr, "connection refused"} {
		if !strings.Contains(out, w) {
			t.Errorf("log does not contain %q:\n%s", w, out)
		}
	}
}

// franz-go's warning repeated every 250 ms while a broker is unreachable is logged once a
// minute, then with how often it was repeated; another warning is logged at once.
func TestKafkaWarningsRepeatedAreLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	l := kafkaLog{kslog.New(slog.New(slog.NewTextHandler(&buf, nil))), &kafkaRepeats{seen: map[string]kafkaRepeat{}}, func() time.Time { return now }}
	for range 40 { // 10 s of retries
		l.Log(kgo.LogLevelWarn, "unable to open connection to broker", "addr", "127.0.0.1:1", "err", "connection refused")
		now = now.Add(250 * time.Millisecond)
	}
	l.Log(kgo.LogLevelWarn, "another warning")
	if n := strings.Count(buf.String(), "unable to open connection"); n != 1 {
		t.Errorf("logged %d times in 10 s, want once:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "another warning") {
		t.Errorf("another warning was not logged:\n%s", buf.String())
	}
	now = now.Add(kafkaRepeatWindow)
	l.Log(kgo.LogLevelWarn, "unable to open connection to broker", "addr", "127.0.0.1:1", "err", "connection refused")
	if !strings.Contains(buf.String(), "repeated_since_last_logged=39") {
		t.Errorf("after the window: not logged again with its count:\n%s", buf.String())
	}
}
