package main

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestPGTLSOf(t *testing.T) {
	t.Parallel()
	cases := map[string]pgTLS{
		"postgres://u@db.example:5432/x?sslmode=disable":                    pgTLSNone,
		"postgres://u@db.example:5432/x?sslmode=allow":                      pgTLSNone,
		"postgres://u@db.example:5432/x":                                    pgTLSFallback, // pgx's default is prefer
		"postgres://u@db.example:5432/x?sslmode=prefer":                     pgTLSFallback,
		"postgres://u@db.example:5432/x?sslmode=require":                    pgTLSUnverified,
		"postgres://u@db.example:5432/x?sslmode=verify-full":                pgTLSVerified,
		"host=db.example user=u sslmode=verify-ca sslrootcert=" + caFile(t): pgTLSVerified,
	}
	for s, want := range cases {
		cfg, err := pgconn.ParseConfig(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := pgTLSOf(cfg); got != want {
			t.Errorf("%s: pgTLSOf = %d, want %d", s, got, want)
		}
	}
}

// caFile writes a CA certificate for sslrootcert.
func caFile(t *testing.T) string {
	cert, _ := selfSigned(t, t.TempDir())
	return cert
}

func TestURLHasPassword(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"postgres://u:pw@h/db":            true,
		"postgres://u@h/db?password=pw":   true,
		"postgresql://u:@h/db":            true,
		"postgres://u@h/db":               false,
		"host=h user=u password=pw":       true,
		"host=h user=u":                   false,
		"postgres://u@h/db?sslmode=allow": false,
	} {
		if got := urlHasPassword(s); got != want {
			t.Errorf("urlHasPassword(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestWarnInsecure checks the startup warnings, and that they name no secret.
func TestWarnInsecure(t *testing.T) {
	// Twins that dev-up exports would make the flags count as given by the environment.
	t.Setenv("CDC_RELAY_PG_URL", "")
	t.Setenv("CDC_RELAY_KAFKA_PASSWORD", "")
	var k kafkaSecurity
	var c common
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	k.register(fs)
	args := []string{"--pg-url", "postgres://u:" + testSecret + "@db.example/x?sslmode=require", "--kafka-tls-insecure-skip-verify",
		"--kafka-sasl-mechanism", "PLAIN", "--kafka-user", "u", "--kafka-password", testSecret}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := c.loadPG(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	warnInsecure(slog.New(slog.NewTextHandler(&buf, nil)), fs, &c, []string{"kafka.example:9093"}, &k)
	out := buf.String()
	for _, w := range []string{"sslmode=require", "not verified (--kafka-tls-insecure-skip-verify)", "--kafka-password on the command line", "password in --pg-url"} {
		if !strings.Contains(out, w) {
			t.Errorf("warnings do not contain %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, testSecret) {
		t.Errorf("warnings show the secret:\n%s", out)
	}

	// Loopback and verified: nothing to say.
	buf.Reset()
	c2, k2 := common{pgURL: "postgres://u@127.0.0.1/x?sslmode=disable"}, kafkaSecurity{}
	if err := c2.loadPG(); err != nil {
		t.Fatal(err)
	}
	warnInsecure(slog.New(slog.NewTextHandler(&buf, nil)), flag.NewFlagSet("run", flag.ContinueOnError), &c2, []string{"127.0.0.1:9092"}, &k2)
	if buf.Len() != 0 {
		t.Errorf("warnings for a loopback setup:\n%s", buf.String())
	}
}
