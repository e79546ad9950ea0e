package main

import (
	"bytes"
	"flag"
	"net"
	"strings"
	"testing"
	"time"
)

func TestReadSecretFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, content := range []string{testSecret, testSecret + "\n", testSecret + "\r\n"} {
		got, err := readSecretFile("pg-password-file", writeFile(t, dir, "pw", content))
		if err != nil || got != testSecret {
			t.Errorf("readSecretFile(%q) = %q, %v; want the password without the line break", content, got, err)
		}
	}
	// A password with spaces at its ends keeps them: only the line break is dropped.
	if got, _ := readSecretFile("x", writeFile(t, dir, "sp", " a b \n")); got != " a b " {
		t.Errorf("readSecretFile kept %q, want %q", got, " a b ")
	}
}

// TestSecretValue pins that a password flag never shows its value, set or not.
func TestSecretValue(t *testing.T) {
	t.Parallel()
	var s secretValue
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.Var(&s, "kafka-password", "")
	if d := fs.Lookup("kafka-password").DefValue; d != "" {
		t.Errorf("default shown as %q, want empty", d)
	}
	if err := fs.Set("kafka-password", testSecret); err != nil {
		t.Fatal(err)
	}
	if s.Value() != testSecret {
		t.Errorf("Value() = %q", s.Value())
	}
	if got := fs.Lookup("kafka-password").Value.String(); strings.Contains(got, testSecret) {
		t.Errorf("String() = %q shows the secret", got)
	}
}

// TestHelpHidesSecrets runs `--help` with passwords in the environment twins (they are
// applied before parsing) and in the URL: no help text may show them.
func TestHelpHidesSecrets(t *testing.T) {
	pwFile := writeFile(t, t.TempDir(), "pw", testSecret)
	t.Setenv("CDC_RELAY_KAFKA_PASSWORD", testSecret)
	t.Setenv("CDC_RELAY_PG_URL", "postgres://u:"+testSecret+"@127.0.0.1:1/db")
	t.Setenv("CDC_RELAY_PG_PASSWORD_FILE", pwFile)
	for _, args := range [][]string{
		{"run", "--help"}, {"poll", "--help"}, {"slot", "create", "--help"}, {"slot", "status", "--help"}, {"slot", "drop", "--help"},
		{"run", "--kafka-password", testSecret, "--help"},
	} {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		all := out.String() + errOut.String()
		if code != exitOK {
			t.Errorf("%q: exit %d\n%s", args, code, all)
		}
		if !strings.Contains(all, "--kafka-password") && args[0] != "slot" {
			t.Errorf("%q: the help does not list --kafka-password:\n%s", args, all)
		}
		if strings.Contains(all, testSecret) {
			t.Errorf("%q: the help shows a secret:\n%s", args, all)
		}
	}
}

// TestUsageErrorsHideSecrets checks the errors of a bad configuration (exit 2): they name
// the flag, never the password.
func TestUsageErrorsHideSecrets(t *testing.T) {
	t.Setenv("CDC_RELAY_KAFKA_PASSWORD", testSecret)
	for _, args := range [][]string{
		{"run", "--pg-url", "postgres://u:" + testSecret + "@127.0.0.1:1/db", "--slot", "s", "--publication", "p", "--brokers", "b:1",
			"--kafka-sasl-mechanism", "PLAIN", "--kafka-user", "u"},
		{"run", "--pg-url", "postgres://u:" + testSecret + "@[bad/db", "--slot", "s", "--publication", "p", "--brokers", "b:1"},
		{"run", "--pg-url", "postgres://u@127.0.0.1/db?password=" + testSecret + "&sslmode=bogus", "--slot", "s", "--publication", "p", "--brokers", "b:1"},
		{"run", "--pg-url", "host=127.0.0.1 password=" + testSecret + " port=notaport", "--slot", "s", "--publication", "p", "--brokers", "b:1"},
		{"slot", "status", "--pg-url", "host=127.0.0.1 password='" + testSecret + " x' sslmode=bogus", "--slot", "s"},
		{"run", "--pg-url", "postgres://u@127.0.0.1:1/db", "--pg-password-file", "/nonexistent/" + "pw", "--slot", "s", "--publication", "p", "--brokers", "b:1"},
	} {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		all := out.String() + errOut.String()
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args[len(args)-2:], code, exitUsage, all)
		}
		if strings.Contains(all, testSecret) {
			t.Errorf("output shows a secret:\n%s", all)
		}
	}
}

// TestMetricsDefaultLoopback pins that metrics and health are served on loopback unless
// --metrics-addr says otherwise.
func TestMetricsDefaultLoopback(t *testing.T) {
	t.Parallel()
	host, _, err := net.SplitHostPort(defaultMetricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Errorf("default metrics address %q is not a loopback address", defaultMetricsAddr)
	}
	var o opsFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o.registerMetrics(fs)
	if got := fs.Lookup("metrics-addr").DefValue; got != defaultMetricsAddr {
		t.Errorf("--metrics-addr default %q, want %q", got, defaultMetricsAddr)
	}
}

// --primary-url and --standby-url connect to their own server with --pg-url's password file and
// timeout (c.at), and leave --pg-url's parsed configuration alone.
func TestAtAnotherServer(t *testing.T) {
	t.Parallel()
	c := common{pgURL: "postgres://u@primary:5432/db", pgTimeout: 3 * time.Second,
		pgPasswordFile: writeFile(t, t.TempDir(), "pw", testSecret+"\n")}
	if err := c.loadPG(); err != nil {
		t.Fatal(err)
	}
	sc, err := c.at("standby-url", "postgres://u@standby:5433/db?connect_timeout=60")
	if err != nil {
		t.Fatal(err)
	}
	if sc.pg.Host != "standby" || sc.pg.Port != 5433 || sc.pg.Password != testSecret || sc.pg.ConnectTimeout != 3*time.Second {
		t.Errorf("standby config: %s:%d, password from the file %v, timeout %s", sc.pg.Host, sc.pg.Port, sc.pg.Password == testSecret, sc.pg.ConnectTimeout)
	}
	if c.pg.Host != "primary" {
		t.Errorf("--pg-url's config now leads to %s", c.pg.Host)
	}
	if _, err := c.at("standby-url", "postgres://u:"+testSecret+"@h:notaport/db"); err == nil ||
		!strings.Contains(err.Error(), "bad --standby-url") || strings.Contains(err.Error(), testSecret) {
		t.Errorf("bad URL: %v; want an error naming --standby-url without the password", err)
	}
}
