package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// The secure variant: Postgres over TLS (sslmode=verify-full) as a role with LOGIN,
// REPLICATION and SELECT on the outbox table only, Kafka over SASL_SSL or mutual TLS,
// passwords from files or environment twins. scripts/dev-up.sh starts it next to the
// plaintext one.

// secureRelay is one test's relay over the secure variant: a fixture whose slot and
// publication the admin created and whose table the least-privilege roles may read.
type secureRelay struct {
	*testenv.RelayEnv
	s *testenv.Secure
}

func newSecureRelay(t *testing.T) *secureRelay {
	t.Helper()
	s := testenv.SecureEnv(t)
	e := testenv.NewRelayEnv(t, true)
	grantSelect(t, e.F, s.PGRole, s.PGCertRole)
	return &secureRelay{RelayEnv: e, s: s}
}

func grantSelect(t *testing.T, f *testenv.Fixture, roles ...string) {
	t.Helper()
	for _, r := range roles {
		if _, err := f.Pool.Exec(context.Background(), "GRANT SELECT ON "+f.Table+" TO "+pgx.Identifier{r}.Sanitize()); err != nil {
			t.Fatalf("grant select to %s: %v", r, err)
		}
	}
}

// pgEnv connects as the password role over verify-full TLS, the password from its file.
func (r *secureRelay) pgEnv() []string {
	return []string{"CDC_RELAY_PG_URL=" + r.s.PGURL, "CDC_RELAY_PG_PASSWORD_FILE=" + r.s.PGPasswordFile}
}

// saslEnv connects to the SASL_SSL listener with the test CA and the given mechanism.
func (r *secureRelay) saslEnv(mechanism string) []string {
	return []string{
		"CDC_RELAY_BROKERS=" + r.s.Brokers, "CDC_RELAY_KAFKA_CA_FILE=" + r.s.CA,
		"CDC_RELAY_KAFKA_SASL_MECHANISM=" + mechanism, "CDC_RELAY_KAFKA_USER=" + r.s.KafkaUser,
		"CDC_RELAY_KAFKA_PASSWORD_FILE=" + r.s.KafkaPassFile,
	}
}

// secrets are the values no output may contain.
func (r *secureRelay) secrets(extra ...string) []string {
	return append([]string{r.s.PGPassword, r.s.KafkaPassword}, extra...)
}

// walsender returns the role and TLS state of the process streaming the fixture's slot.
func walsender(t *testing.T, f *testenv.Fixture) (role string, ssl, ok bool) {
	t.Helper()
	err := f.Pool.QueryRow(context.Background(), `SELECT a.usename, s.ssl FROM pg_replication_slots r
		JOIN pg_stat_activity a ON a.pid = r.active_pid JOIN pg_stat_ssl s ON s.pid = r.active_pid
		WHERE r.slot_name = $1`, f.Slot).Scan(&role, &ssl)
	if err == pgx.ErrNoRows {
		return "", false, false
	}
	if err != nil {
		t.Fatalf("read the walsender of %s: %v", f.Slot, err)
	}
	return role, ssl, true
}

// wantEncryptedWalsender reports an error unless the fixture's slot is streamed by role over TLS.
func wantEncryptedWalsender(t *testing.T, f *testenv.Fixture, role string) {
	t.Helper()
	if got, ssl, ok := walsender(t, f); !ok || got != role || !ssl {
		t.Errorf("walsender of the slot: role %q, ssl %v, active %v; want %q over TLS", got, ssl, ok, role)
	}
}

// requireLeastPrivilege fails unless role has LOGIN and REPLICATION and no other attribute.
func requireLeastPrivilege(t *testing.T, f *testenv.Fixture, role string) {
	t.Helper()
	var super, createDB, createRole, bypass, login, repl bool
	err := f.Pool.QueryRow(context.Background(), `SELECT rolsuper, rolcreatedb, rolcreaterole, rolbypassrls, rolcanlogin, rolreplication
		FROM pg_roles WHERE rolname = $1`, role).Scan(&super, &createDB, &createRole, &bypass, &login, &repl)
	if err != nil {
		t.Fatalf("read role %s: %v", role, err)
	}
	if super || createDB || createRole || bypass || !login || !repl {
		t.Fatalf("role %s is not least-privilege: superuser=%v createdb=%v createrole=%v bypassrls=%v login=%v replication=%v",
			role, super, createDB, createRole, bypass, login, repl)
	}
}

// noSecrets fails if out contains any of the secrets.
func noSecrets(t *testing.T, what, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(out, s) {
			t.Errorf("%s shows a secret (%d characters):\n%s", what, len(s), out)
		}
	}
}

// freeAddr returns a loopback address nothing listens on (for --metrics-addr).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestSecureRun publishes through TLS and SASL as the least-privilege role, with each SASL
// mechanism: the walsender belongs to that role and is encrypted, every row arrives, and the
// output shows no password.
func TestSecureRun(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			r := newSecureRelay(t)
			requireLeastPrivilege(t, r.F, r.s.PGRole)
			c := testenv.Consume(t, r.F.Topic)
			p := r.Start(t, append(r.pgEnv(), r.saslEnv(mech)...), "--metrics-addr", freeAddr(t))
			want := r.F.Insert(t, false, testenv.Row{Key: "a", Payload: `{"n":1}`}, testenv.Row{Key: "b", Payload: `{"n":2}`})
			want = append(want, r.F.Insert(t, false, testenv.Row{Key: "a", Payload: `{"n":3}`})...)
			c.WaitFor(t, 60*time.Second, "rows published over SASL_SSL", hasAll(want))
			wantEncryptedWalsender(t, r.F, r.s.PGRole)
			if code := p.Stop(t); code != 0 {
				t.Errorf("exit %d after SIGTERM, want 0\n%s", code, p.Output())
			}
			noSecrets(t, "relay output", p.Output(), r.secrets())
		})
	}
}

// TestSecureRunMutualTLS authenticates with client certificates only: Postgres's cert role
// (verify-full, sslcert and sslkey in the URL, no password) and Kafka's SSL listener, which
// requires a client certificate.
func TestSecureRunMutualTLS(t *testing.T) {
	t.Parallel()
	r := newSecureRelay(t)
	requireLeastPrivilege(t, r.F, r.s.PGCertRole)
	c := testenv.Consume(t, r.F.Topic)
	p := r.Start(t, nil, "--pg-url", r.s.CertURL(), "--brokers", r.s.MTLSBrokers,
		"--kafka-ca-file", r.s.CA, "--kafka-cert-file", r.s.ClientCert, "--kafka-key-file", r.s.ClientKey,
		"--metrics-addr", freeAddr(t))
	want := r.F.Insert(t, false, testenv.Row{Key: "k", Payload: `{"mtls":true}`})
	c.WaitFor(t, 60*time.Second, "rows published over mutual TLS", hasAll(want))
	wantEncryptedWalsender(t, r.F, r.s.PGCertRole)
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\n%s", code, p.Output())
	}
}

// TestSecretsNeverLeak runs the relay with debug logs through a normal run, a cut
// replication connection (which it must retry, logging the cause), slot status, and
// failures (wrong passwords, unreachable hosts, a password in the URL), then searches
// everything it printed, its metrics, its help and its command line for the secrets.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	r := newSecureRelay(t)
	wrongPG, wrongKafka := "wrong-pg-"+r.F.Name, "wrong-kafka-"+r.F.Name
	secrets := r.secrets(wrongPG, wrongKafka)
	dir := t.TempDir()
	wrongPGFile := filepath.Join(dir, "pg-wrong")
	if err := os.WriteFile(wrongPGFile, []byte(wrongPG+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var outputs []string
	record := func(what, out string) {
		outputs = append(outputs, out)
		noSecrets(t, what, out, secrets)
	}

	// A normal run, at debug level, the Kafka password in the environment twin.
	c := testenv.Consume(t, r.F.Topic)
	metrics := freeAddr(t)
	env := append(r.pgEnv(), r.saslEnv("SCRAM-SHA-512")...)
	env = append(env, "CDC_RELAY_KAFKA_PASSWORD_FILE=", "CDC_RELAY_KAFKA_PASSWORD="+r.s.KafkaPassword)
	p := r.Start(t, env, "--log-level", "debug", "--metrics-addr", metrics)
	want := r.F.Insert(t, false, testenv.Row{Key: "a", Payload: `{"step":1}`})
	c.WaitFor(t, 60*time.Second, "the first row", hasAll(want))
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID())); err == nil {
		record("the relay's command line", strings.ReplaceAll(string(cmdline), "\x00", " "))
	}

	// Cut the replication connection: the relay reconnects with the password from the file
	// and says why each time.
	var pid int32
	testenv.Eventually(t, 30*time.Second, "the slot to be active", func() bool {
		err := r.F.Pool.QueryRow(context.Background(), `SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1`, r.F.Slot).Scan(&pid)
		return err == nil && pid != 0
	})
	if _, err := r.F.Pool.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a logged reconnect with its cause", func() bool {
		out := p.Output()
		return strings.Contains(out, "reconnecting") && strings.Contains(out, "cause=")
	})
	want = append(want, r.F.Insert(t, false, testenv.Row{Key: "a", Payload: `{"step":2}`})...)
	c.WaitFor(t, 60*time.Second, "a row after the reconnect", hasAll(want))
	if role, ssl, ok := walsender(t, r.F); !ok || role != r.s.PGRole || !ssl {
		t.Errorf("after the reconnect the walsender is role %q, ssl %v, active %v", role, ssl, ok)
	}

	// Metrics and health: labels and values carry no secret.
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		resp, err := http.Get("http://" + metrics + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		record("GET "+path, string(body))
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
	record("the relay's output", p.Output())
	// Every connection of the relay (preflight, replication, slot metrics) got the password
	// from the file: none was refused.
	if strings.Contains(p.Output(), "password authentication failed") {
		t.Errorf("a connection of the relay went without the password from --pg-password-file:\n%s", p.Output())
	}

	// slot status, as the role, text and JSON.
	for _, args := range [][]string{{"slot", "status", "--publication", r.F.Publication}, {"slot", "status", "--json"}} {
		out, errOut, code := testenv.Run(t, 30*time.Second, r.Bin, append(append([]string{}, r.Env...), r.pgEnv()...), args...)
		if code != 0 || !strings.Contains(out, r.F.Slot) {
			t.Errorf("%q as %s: exit %d\n%s%s", args, r.s.PGRole, code, out, errOut)
		}
		record(strings.Join(args, " "), out+errOut)
	}

	// Failures: each must exit 1 and print no secret.
	hp := hostPort(t, r.s.PGURL)
	base := append(append([]string{}, r.Env...), "CDC_RELAY_METRICS_ADDR=127.0.0.1:0", "CDC_RELAY_LOG_LEVEL=debug")
	failures := []struct {
		name string
		env  []string
	}{
		{"wrong Postgres password", append(r.saslEnv("SCRAM-SHA-256"), "CDC_RELAY_PG_URL="+r.s.PGURL, "CDC_RELAY_PG_PASSWORD_FILE="+wrongPGFile)},
		{"Postgres password in the URL, wrong", append(r.saslEnv("SCRAM-SHA-256"),
			"CDC_RELAY_PG_URL="+strings.Replace(r.s.PGURL, "@", ":"+wrongPG+"@", 1))},
		{"wrong Kafka password", append(append(r.pgEnv(), r.saslEnv("SCRAM-SHA-256")...), "CDC_RELAY_KAFKA_PASSWORD_FILE=", "CDC_RELAY_KAFKA_PASSWORD="+wrongKafka)},
		{"wrong Kafka password with PLAIN", append(append(r.pgEnv(), r.saslEnv("PLAIN")...), "CDC_RELAY_KAFKA_PASSWORD_FILE=", "CDC_RELAY_KAFKA_PASSWORD="+wrongKafka)},
	}
	for _, f := range failures {
		out, errOut, code := testenv.Run(t, 60*time.Second, r.Bin, append(append([]string{}, base...), f.env...), "run")
		if code != 1 {
			t.Errorf("%s: exit %d, want 1\n%s%s", f.name, code, out, errOut)
		}
		record(f.name, out+errOut)
	}
	// Unreachable services are waited for, with a warning each cycle that names the cause: those
	// warnings must carry no secret either.
	waits := []struct {
		name, want string
		env        []string
	}{
		{"Postgres password in the URL, host unreachable", "waiting for PostgreSQL", append(r.saslEnv("SCRAM-SHA-256"),
			"CDC_RELAY_PG_URL="+strings.Replace(strings.Replace(r.s.PGURL, "@", ":"+r.s.PGPassword+"@", 1), hp, "127.0.0.1:1", 1))},
		{"Kafka unreachable", "waiting for Kafka", append(append(r.pgEnv(), r.saslEnv("SCRAM-SHA-512")...), "CDC_RELAY_BROKERS=127.0.0.1:1", "CDC_RELAY_KAFKA_TIMEOUT=1s")},
	}
	for _, w := range waits {
		p := testenv.Start(t, r.Bin, append(append([]string{}, base...), w.env...), "run")
		testenv.Eventually(t, 30*time.Second, w.name+": two warnings of the wait", func() bool { return strings.Count(p.Output(), w.want) >= 2 })
		if code := p.Stop(t); code != 0 {
			t.Errorf("%s: SIGTERM while waiting: exit %d, want 0", w.name, code)
		}
		record(w.name, p.Output())
	}

	// --help, with every secret in the environment twins.
	helpEnv := append(append([]string{}, r.pgEnv()...), "CDC_RELAY_KAFKA_PASSWORD="+r.s.KafkaPassword,
		"CDC_RELAY_PG_URL="+strings.Replace(r.s.PGURL, "@", ":"+r.s.PGPassword+"@", 1))
	for _, args := range [][]string{{"run", "--help"}, {"slot", "status", "--help"}, {"poll", "--help"}} {
		out, errOut, _ := testenv.Run(t, 30*time.Second, r.Bin, helpEnv, args...)
		record(strings.Join(args, " "), out+errOut)
	}
	if t.Failed() {
		t.Logf("searched %d outputs", len(outputs))
	}
}

// hostPort returns the URL's host:port.
func hostPort(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}

// TestSecureStartupFailures checks that each way a secure connection can fail at startup
// ends the relay with exit 1 within seconds and a message that names what failed and where
// (the server's address) and what to check.
func TestSecureStartupFailures(t *testing.T) {
	t.Parallel()
	r := newSecureRelay(t)
	dir := t.TempDir()
	wrongPW := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrongPW, []byte("not-the-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	otherCA, _ := testenv.SelfSignedCA(t, dir, "some other CA")
	wrongCert, wrongKey := r.s.WrongHostCert()
	fakePG := testenv.FakeTLSServer(t, wrongCert, wrongKey, true)
	fakeKafka := testenv.FakeTLSServer(t, wrongCert, wrongKey, false)
	pgHP := hostPort(t, r.s.PGURL)
	plainBrokers := strings.Join(testenv.Brokers(t), ",")
	url := func(old, new string) string { return strings.Replace(r.s.PGURL, old, new, 1) }
	sasl := r.saslEnv("SCRAM-SHA-256")

	cases := []struct {
		name  string
		env   []string
		args  []string
		limit time.Duration
		want  []string
	}{
		{"Postgres: wrong password", append(r.pgEnv(), "CDC_RELAY_PG_PASSWORD_FILE="+wrongPW), nil, 5 * time.Second,
			[]string{"connect to PostgreSQL at " + pgHP, "password authentication failed", "--pg-password-file"}},
		{"Postgres: unknown CA", r.pgEnv(), []string{"--pg-url", url(r.s.CA, otherCA)}, 5 * time.Second,
			[]string{"connect to PostgreSQL at " + pgHP, "certificate signed by unknown authority", "sslrootcert"}},
		{"Postgres: hostname mismatch", r.pgEnv(), []string{"--pg-url", url(pgHP, fakePG)}, 5 * time.Second,
			[]string{"connect to PostgreSQL at " + fakePG, "x509: cannot validate certificate for 127.0.0.1", "does not name the host"}},
		{"Postgres: TLS-only role without TLS", r.pgEnv(), []string{"--pg-url", url("sslmode=verify-full", "sslmode=disable")}, 5 * time.Second,
			[]string{"connect to PostgreSQL at " + pgHP, "no encryption", "sslmode"}},
		{"Kafka: wrong password", append(append(r.pgEnv(), sasl...), "CDC_RELAY_KAFKA_PASSWORD_FILE="+wrongPW), nil, 6 * time.Second,
			[]string{"Kafka is unreachable at [" + r.s.Brokers + "]", "SASL_AUTHENTICATION_FAILED", "--kafka-user"}},
		{"Kafka: unknown CA", append(append(r.pgEnv(), sasl...), "CDC_RELAY_KAFKA_CA_FILE="+otherCA), nil, 6 * time.Second,
			[]string{"Kafka is unreachable at [" + r.s.Brokers + "]", "certificate signed by unknown authority", "--kafka-ca-file"}},
		{"Kafka: hostname mismatch", append(append(r.pgEnv(), sasl...), "CDC_RELAY_BROKERS="+fakeKafka), nil, 6 * time.Second,
			[]string{"Kafka is unreachable at [" + fakeKafka + "]", "x509: cannot validate certificate for 127.0.0.1", "does not name the address"}},
		{"Kafka: TLS listener spoken to in plaintext", r.pgEnv(), []string{"--brokers", r.s.Brokers}, 6 * time.Second,
			[]string{"Kafka is unreachable at [" + r.s.Brokers + "]", "plaintext connection speaking to a tls endpoint", "needs --kafka-tls"}},
		{"Kafka: mutual TLS without a client certificate", r.pgEnv(), []string{"--brokers", r.s.MTLSBrokers, "--kafka-ca-file", r.s.CA}, 6 * time.Second,
			[]string{"Kafka is unreachable at [" + r.s.MTLSBrokers + "]", "tls: ", "--kafka-cert-file"}},
		{"Kafka: TLS spoken to a plaintext listener", r.pgEnv(), []string{"--brokers", plainBrokers, "--kafka-tls", "--kafka-timeout", "2s"}, 8 * time.Second,
			[]string{"Kafka is unreachable at [" + plainBrokers + "]", "TLS when the broker is not expecting it"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := append(append([]string{}, r.Env...), "CDC_RELAY_METRICS_ADDR=127.0.0.1:0")
			start := time.Now()
			out, errOut, code := testenv.Run(t, 60*time.Second, r.Bin, append(env, c.env...), append([]string{"run"}, c.args...)...)
			took := time.Since(start)
			all := out + errOut
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if took > c.limit {
				t.Errorf("took %s, want at most %s", took.Round(time.Millisecond), c.limit)
			}
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("output does not contain %q", w)
				}
			}
			noSecrets(t, "output", all, r.secrets())
			if t.Failed() {
				t.Logf("output:\n%s", all)
			}
		})
	}
}

// TestLeastPrivilegeSlotCommands runs the slot commands as the role with LOGIN, REPLICATION
// and SELECT on the outbox: creating the publication needs CREATE on the database and
// ownership of the table, and the refusal says so; once an owner made the publication, the
// role creates, inspects and drops the slot itself.
func TestLeastPrivilegeSlotCommands(t *testing.T) {
	t.Parallel()
	s := testenv.SecureEnv(t)
	f := testenv.NewFixture(t)
	grantSelect(t, f, s.PGRole)
	bin := testenv.Binary(t, true)
	env := []string{"CDC_RELAY_PG_URL=" + s.PGURL, "CDC_RELAY_PG_PASSWORD_FILE=" + s.PGPasswordFile,
		"CDC_RELAY_SLOT=" + f.Slot, "CDC_RELAY_PUBLICATION=" + f.Publication}
	secrets := []string{s.PGPassword, s.KafkaPassword}
	role := pgx.Identifier{s.PGRole}.Sanitize()
	cli := func(wantCode int, want string, args ...string) {
		t.Helper()
		out, errOut, code := testenv.Run(t, 30*time.Second, bin, env, args...)
		if code != wantCode || !strings.Contains(out+errOut, want) {
			t.Errorf("%q as %s: exit %d, want %d and %q in:\n%s%s", args, s.PGRole, code, wantCode, want, out, errOut)
		}
		noSecrets(t, strings.Join(args, " "), out+errOut, secrets)
	}

	cli(2, "GRANT CREATE ON DATABASE", "slot", "create", "--table", f.Table)
	cli(2, "TO "+role, "slot", "create", "--table", f.Table)
	var exists bool
	if err := f.Pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, f.Slot).Scan(&exists); err != nil || exists {
		t.Fatalf("a refused slot create left a slot behind (exists %v, err %v)", exists, err)
	}

	// The table's owner makes the publication, and the dead-letter table exists (slot create
	// makes it when missing, which needs CREATE on the schema); the role does the rest.
	ddl, err := deadletters.TableDDL(deadletters.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pool.Exec(context.Background(), ddl); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("create the dead-letter table: %v", err)
	}
	if _, err := f.Pool.Exec(context.Background(), "CREATE PUBLICATION "+pgx.Identifier{f.Publication}.Sanitize()+
		" FOR TABLE "+f.Table+" WITH (publish = 'insert')"); err != nil {
		t.Fatal(err)
	}
	cli(0, "created slot "+f.Slot, "slot", "create", "--table", f.Table)
	cli(0, "confirmed_flush_lsn", "slot", "status", "--publication", f.Publication)
	cli(0, `"slot": "`+f.Slot+`"`, "slot", "status", "--json")
	cli(2, "owned by", "slot", "drop", "--publication", f.Publication)
	cli(0, "dropped slot "+f.Slot, "slot", "drop", "--publication=")
}

// TestSecurePoll runs the polling publisher over the same secure connections, as the role
// with SELECT and UPDATE on the outbox only (no REPLICATION needed, but the shared test role
// has it): the Kafka flag group and --pg-password-file work for poll as for run.
func TestSecurePoll(t *testing.T) {
	t.Parallel()
	s := testenv.SecureEnv(t)
	e := newPollEnv(t) // its index is created by the table's owner
	if _, err := e.F.Pool.Exec(context.Background(), "GRANT SELECT, UPDATE ON "+e.F.Table+" TO "+pgx.Identifier{s.PGRole}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	r := &secureRelay{s: s}
	c := testenv.Consume(t, e.F.Topic)
	p := e.Start(t, append(r.pgEnv(), r.saslEnv("SCRAM-SHA-256")...), "--metrics-addr", freeAddr(t))
	want := e.F.Insert(t, false, testenv.Row{Key: "p", Payload: `{"poll":1}`}, testenv.Row{Key: "q", Payload: `{"poll":2}`})
	c.WaitFor(t, 60*time.Second, "rows polled over SASL_SSL", hasAll(want))
	testenv.Eventually(t, 30*time.Second, "the rows to be marked published", func() bool { return e.pending(t) == 0 })
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\n%s", code, p.Output())
	}
	noSecrets(t, "poll output", p.Output(), r.secrets())
	if strings.Contains(p.Output(), "password authentication failed") {
		t.Errorf("a connection of the poller went without the password from --pg-password-file:\n%s", p.Output())
	}
}
