package sink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// connectHint says what to check after a failed connection to Kafka, and whether the
// failure is permanent: retrying with the same configuration cannot succeed (a certificate
// that is not trusted or does not name the broker, TLS spoken to a plaintext listener,
// credentials the broker refused), so startup should fail now instead of at its timeout.
func connectHint(err error) (hint string, permanent bool) {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		opErr    *net.OpError
		firstEOF *kgo.ErrFirstReadEOF
	)
	switch {
	case errors.As(err, &unknown):
		return "the broker's certificate is not signed by a trusted CA: set --kafka-ca-file to the CA that signed it", true
	case errors.As(err, &hostname):
		return "the broker's certificate does not name the address the relay dialed: use a name the certificate lists in --brokers " +
			"(and as the broker's advertised listener), or fix the certificate", true
	case errors.As(err, &invalid), errors.As(err, &verify):
		return "the broker's certificate was refused: check --kafka-ca-file and the certificate's validity", true
	case errors.As(err, &header):
		return "the broker did not answer with TLS: this listener is plaintext, so drop --kafka-tls or use the broker's TLS listener", true
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
