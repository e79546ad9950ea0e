package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Secure is the secure variant of the local services that scripts/dev-up.sh starts next to
// the plaintext one: Postgres over TLS with least-privilege roles, Kafka over SASL_SSL and
// mutual TLS, with a test CA. Passwords are read from their files.
type Secure struct {
	PGURL          string // CDC_RELAY_TLS_PG_URL: role PGRole, sslmode=verify-full, no password
	PGPasswordFile string // CDC_RELAY_TLS_PG_PASSWORD_FILE
	PGPassword     string // its content
	PGRole         string // the URL's user
	PGCertRole     string // CDC_RELAY_TLS_PG_CERT_ROLE: authenticates with ClientCert
	Brokers        string // CDC_RELAY_TLS_BROKERS: the SASL_SSL listener
	MTLSBrokers    string // CDC_RELAY_MTLS_BROKERS: the SSL listener that requires a client certificate
	CA             string // CDC_RELAY_TLS_CA
	ClientCert     string // CDC_RELAY_TLS_CLIENT_CERT (CN = PGCertRole)
	ClientKey      string // CDC_RELAY_TLS_CLIENT_KEY
	KafkaUser      string // CDC_RELAY_SCRAM_USER
	KafkaPassFile  string // CDC_RELAY_SCRAM_PASSWORD_FILE
	KafkaPassword  string // its content
}

// WrongHostCert and WrongHostKey are a certificate signed by the test CA for another name
// (wrong-host.invalid), for hostname-mismatch tests.
func (s *Secure) WrongHostCert() (cert, key string) {
	d := filepath.Dir(s.CA)
	return filepath.Join(d, "wronghost.crt"), filepath.Join(d, "wronghost.key")
}

// CertURL is the URL for PGCertRole: verify-full, authenticated by the client certificate.
func (s *Secure) CertURL() string {
	u := strings.Replace(s.PGURL, s.PGRole+"@", s.PGCertRole+"@", 1)
	return u + "&sslcert=" + s.ClientCert + "&sslkey=" + s.ClientKey
}

var scramOnce sync.Once

// SecureEnv returns the secure settings; without dev-up's secure exports the test stops
// (Require). It makes sure the broker knows the SCRAM user (it creates the
// credentials over the plaintext listener when they are missing, e.g. after a broker was
// re-created without dev-up).
func SecureEnv(t testing.TB) *Secure {
	t.Helper()
	get := func(name string) string {
		Require(t, "the secure variant of the local services", name)
		return os.Getenv(name)
	}
	read := func(name, path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v; %s", name, err, hint)
		}
		return strings.TrimRight(string(b), "\r\n")
	}
	s := &Secure{
		PGURL: get("CDC_RELAY_TLS_PG_URL"), PGPasswordFile: get("CDC_RELAY_TLS_PG_PASSWORD_FILE"),
		PGCertRole: get("CDC_RELAY_TLS_PG_CERT_ROLE"), Brokers: get("CDC_RELAY_TLS_BROKERS"),
		MTLSBrokers: get("CDC_RELAY_MTLS_BROKERS"), CA: get("CDC_RELAY_TLS_CA"),
		ClientCert: get("CDC_RELAY_TLS_CLIENT_CERT"), ClientKey: get("CDC_RELAY_TLS_CLIENT_KEY"),
		KafkaUser: get("CDC_RELAY_SCRAM_USER"), KafkaPassFile: get("CDC_RELAY_SCRAM_PASSWORD_FILE"),
	}
	s.PGPassword = read("CDC_RELAY_TLS_PG_PASSWORD_FILE", s.PGPasswordFile)
	s.KafkaPassword = read("CDC_RELAY_SCRAM_PASSWORD_FILE", s.KafkaPassFile)
	cfg, err := pgx.ParseConfig(s.PGURL)
	if err != nil {
		t.Fatalf("CDC_RELAY_TLS_PG_URL: %v", err)
	}
	s.PGRole = cfg.User
	var scramErr error
	scramOnce.Do(func() { scramErr = ensureSCRAM(t, s) })
	if scramErr != nil {
		t.Fatalf("Kafka SCRAM credentials of %s: %v; %s", s.KafkaUser, scramErr, hint)
	}
	return s
}

// ensureSCRAM makes sure the user can authenticate with each SCRAM mechanism on the SASL_SSL
// listener, and (re)creates the credentials of a mechanism that fails (missing, or made with
// another password). Working ones are left alone: changing them would break a handshake in
// progress elsewhere.
func ensureSCRAM(t testing.TB, s *Secure) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pem, err := os.ReadFile(s.CA)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	auth := scram.Auth{User: s.KafkaUser, Pass: s.KafkaPassword}
	works := func(m sasl.Mechanism) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), kgo.SASL(m))
		if err != nil {
			return err
		}
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return cl.Ping(pctx)
	}
	var adm *kadm.Client
	for _, m := range []struct {
		mech kadm.ScramMechanism
		sasl sasl.Mechanism
	}{{kadm.ScramSha256, auth.AsSha256Mechanism()}, {kadm.ScramSha512, auth.AsSha512Mechanism()}} {
		if works(m.sasl) == nil {
			continue
		}
		if adm == nil {
			adm = kadm.NewClient(Kafka(t))
		}
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: s.KafkaUser, Mechanism: m.mech, Iterations: 8192, Password: s.KafkaPassword}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return err
		}
		// The broker applies the new credentials asynchronously.
		deadline := time.Now().Add(20 * time.Second)
		for err = works(m.sasl); err != nil && time.Now().Before(deadline); err = works(m.sasl) {
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("%s still refused after updating the credentials: %w", m.mech, err)
		}
	}
	return nil
}

// FakeTLSServer listens on loopback and completes nothing but a TLS handshake with the given
// certificate; with postgres set, it first answers PostgreSQL's SSLRequest with 'S' as a
// server does. It stands in for a server whose certificate names another host.
// It returns the address; it stops at cleanup.
func FakeTLSServer(t testing.TB, certFile, keyFile string, postgres bool) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if postgres {
					req := make([]byte, 8) // length 8, code 80877103
					if _, err := io.ReadFull(c, req); err != nil {
						return
					}
					if _, err := c.Write([]byte{'S'}); err != nil {
						return
					}
				}
				_ = tls.Server(c, cfg).Handshake()
			}()
		}
	}()
	return ln.Addr().String()
}
