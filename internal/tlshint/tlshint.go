// Package tlshint is the one table of TLS handshake failures that the same configuration meets
// again (untrusted CA, wrong name, no TLS), with what to check, in each side's words: cmd's
// PostgreSQL hints, sink's Kafka hints, replication's retry decision. Pure: no goroutines.
package tlshint

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// Words are one side's: what it calls the peer and where its settings are.
type Words struct {
	Peer   string // "server", "broker"
	CA     string // the setting of the trusted CA, e.g. "--kafka-ca-file"
	Name   string // what the certificate must name and how to fix it
	NotTLS string // what to check when the peer did not answer with TLS
}

// Hint returns what to check after err, or "" when err is no TLS failure this table knows.
func Hint(err error, w Words) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return "the " + w.Peer + "'s certificate is not signed by a CA the relay trusts: set " + w.CA + " to the CA that signed it"
	case errors.As(err, &hostname):
		return "the " + w.Peer + "'s certificate does not name the " + w.Name
	case errors.As(err, &invalid), errors.As(err, &verify):
		return "the " + w.Peer + "'s certificate was refused: check " + w.CA + ", the certificate's validity and its names"
	case errors.As(err, &header):
		return "the " + w.Peer + " did not answer with TLS: " + w.NotTLS
	}
	return ""
}
