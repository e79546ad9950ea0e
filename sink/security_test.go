package sink

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestConnectHint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		err       error
		want      string
		permanent bool
	}{
		{"unknown CA", fmt.Errorf("unable to dial: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), "--kafka-ca-file", true},
		{"hostname", fmt.Errorf("unable to dial: %w", &tls.CertificateVerificationError{Err: x509.HostnameError{Host: "x"}}), "does not name", true},
		{"TLS to plaintext", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "drop --kafka-tls", true},
		{"plaintext to TLS", errors.New("invalid large response size 352518912 > limit 104857600; the first three bytes received appear to be a tls alert record for TLS v1.2; is this a plaintext connection speaking to a tls endpoint?"), "needs --kafka-tls", true},
		{"client certificate refused", &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, "--kafka-cert-file", true},
		{"bad credentials", fmt.Errorf("auth: %w", kerr.SaslAuthenticationFailed), "--kafka-user", true},
		{"mechanism", kerr.UnsupportedSaslMechanism, "--kafka-sasl-mechanism", true},
		{"first read EOF", &kgo.ErrFirstReadEOF{}, "--kafka-tls", false},
		{"refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, "", false},
		{"deadline", context.DeadlineExceeded, "", false},
	}
	for _, c := range cases {
		hint, permanent := connectHint(c.err)
		if permanent != c.permanent || !strings.Contains(hint, c.want) || (c.want == "") != (hint == "") {
			t.Errorf("%s: connectHint = %q, %v; want a hint with %q, permanent %v", c.name, hint, permanent, c.want, c.permanent)
		}
	}
}

// TestPingFailsFastOnUntrustedCertificate pins that a broker whose certificate cannot be
// verified ends Ping at once, with the hint, instead of at the startup timeout.
func TestPingFailsFastOnUntrustedCertificate(t *testing.T) {
	t.Parallel()
	addr := selfSignedTLSListener(t)
	s, err := New(Config{Brokers: []string{addr}, Opts: []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: x509.NewCertPool()})}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err = s.Ping(ctx)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "--kafka-ca-file") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Ping = %v; want ErrUnreachable naming %s and --kafka-ca-file", err, addr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Ping took %s: an untrusted certificate must fail at once", took)
	}
}

// selfSignedTLSListener accepts TLS connections with a certificate nobody trusts.
func selfSignedTLSListener(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.Copy(io.Discard, c) // the handshake fails on the client's side
			}()
		}
	}()
	return ln.Addr().String()
}
