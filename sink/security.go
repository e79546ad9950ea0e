package sink

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cdc-relay/cdc-relay/internal/tlsfiles"
	"github.com/cdc-relay/cdc-relay/internal/tlshint"
)

// Security is how the client reaches the brokers: TLS (verified against CAFile, or the
// system's roots) and SASL. Its zero value is plaintext without SASL.
type Security struct {
	TLS                bool   // implied by CAFile, CertFile, KeyFile and InsecureSkipVerify
	CAFile             string // PEM file of the CA(s) that sign the brokers' certificates
	CertFile, KeyFile  string // PEM client certificate and key, for mutual TLS
	InsecureSkipVerify bool   // do not verify the brokers' certificates (testing only)
	SASLMechanism      string // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (any case); "" for none
	User, Password     string // SASL credentials
}

// SecurityError is a Security that cannot work, one line a finding. The lines name the fields
// as "Security.Field", for a command to put its own names in (cdc-relay: its flags).
type SecurityError struct{ Err error }

func (e *SecurityError) Error() string { return e.Err.Error() }
func (e *SecurityError) Unwrap() error { return e.Err }

// Opts checks s, reads its files and returns the franz-go options for it, to put into
// Config.Opts. Errors are a *SecurityError and never contain the password.
func (s Security) Opts() ([]kgo.Opt, error) {
	var o []kgo.Opt
	tc, tlsErr := s.tlsConfig()
	if tc != nil && tlsErr == nil {
		// franz-go sets ServerName to each broker's host when it dials, so names are verified.
		o = append(o, kgo.DialTLSConfig(tc))
	}
	mech, saslErr := s.sasl(tc != nil)
	if mech != nil {
		o = append(o, kgo.SASL(mech))
	}
	if err := errors.Join(tlsErr, saslErr); err != nil {
		return nil, &SecurityError{err}
	}
	return o, nil
}

// tlsConfig returns nil when TLS is off.
func (s Security) tlsConfig() (*tls.Config, error) {
	if !s.TLS && s.CAFile == "" && s.CertFile == "" && s.KeyFile == "" && !s.InsecureSkipVerify {
		return nil, nil
	}
	return tlsfiles.Config(tlsfiles.Files{CA: s.CAFile, Cert: s.CertFile, Key: s.KeyFile}, s.InsecureSkipVerify, securityTLSWords)
}

// securityTLSWords name the TLS files by their Security fields in its errors.
var securityTLSWords = tlsfiles.Words{CA: "Security.CAFile", Cert: "Security.CertFile", Key: "Security.KeyFile",
	CertWithoutKey: "Security.CertFile needs Security.KeyFile",
	KeyWithoutCert: "Security.KeyFile needs Security.CertFile"}

// sasl returns nil when SASL is off.
func (s Security) sasl(withTLS bool) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(s.SASLMechanism))
	if mech == "" {
		if s.User != "" || s.Password != "" {
			return nil, errors.New("Security.User and Security.Password need Security.SASLMechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
		return nil, nil
	}
	var errs []error
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512": // as Kafka names them
	default:
		errs = append(errs, fmt.Errorf("Security.SASLMechanism %q: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.SASLMechanism))
	}
	if mech == "PLAIN" && !withTLS {
		errs = append(errs, errors.New("Security.SASLMechanism PLAIN sends the password as it is: it needs Security.TLS"))
	}
	if s.User == "" {
		errs = append(errs, fmt.Errorf("Security.SASLMechanism %s needs Security.User", mech))
	}
	if s.Password == "" {
		errs = append(errs, fmt.Errorf("Security.SASLMechanism %s needs Security.Password", mech))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism(), nil
	}
}

// kafkaTLSWords are Kafka's words in the TLS hints.
var kafkaTLSWords = tlshint.Words{Peer: "broker", CA: "--kafka-ca-file",
	Name:   "address the relay dialed: use a name the certificate lists in --brokers (and as the broker's advertised listener), or fix the certificate",
	NotTLS: "this listener is plaintext, so drop --kafka-tls or use the broker's TLS listener"}

// connectHint says what to check after a failed connection to Kafka, and whether the
// failure is permanent: retrying with the same configuration cannot succeed (a certificate
// that is not trusted or does not name the broker, TLS spoken to a plaintext listener,
// credentials the broker refused), so startup should fail now instead of at its timeout.
// The hints name cdc-relay's flags: they reach the operator in the relay's log.
func connectHint(err error) (hint string, permanent bool) {
	var (
		opErr    *net.OpError
		firstEOF *kgo.ErrFirstReadEOF
	)
	if hint := tlshint.Hint(err, kafkaTLSWords); hint != "" {
		return hint, true
	}
	switch {
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		return "the broker refused the TLS handshake: if its listener requires a client certificate, set --kafka-cert-file and --kafka-key-file", true
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return "the broker refused the credentials: check --kafka-user, the password and --kafka-sasl-mechanism", true
	case errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return "the broker's listener does not accept this SASL mechanism: check --kafka-sasl-mechanism and that --brokers names its SASL listener", true
	case strings.Contains(err.Error(), "appear to be a tls alert record"):
		// franz-go's guess, from the answer's first bytes, has no error type of its own.
		return "the broker answered with TLS: this listener needs --kafka-tls (and --kafka-ca-file unless the system trusts its CA)", true
	case errors.As(err, &firstEOF):
		return "the broker closed the connection at once: a TLS listener spoken to in plaintext (set --kafka-tls), or a SASL listener " +
			"without SASL (set --kafka-sasl-mechanism), or the reverse", false
	}
	return "", false
}
