// Package tlsfiles builds a client's tls.Config from the files a user names (a CA to trust, a
// certificate and its key), with errors that name each file in the caller's words: sink's
// Kafka Security, schema's registry Config. Pure: it reads the files and nothing else.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files are the PEM files of a client's TLS; an empty name is a file not used.
type Files struct {
	CA   string // the CA to trust instead of the system's roots
	Cert string // the client certificate, with Key
	Key  string // the client certificate's key, with Cert
}

// Words are how the caller's errors name its settings.
type Words struct {
	CA             string // the CA file's setting, e.g. "Security.CAFile"
	Cert           string // the certificate's, e.g. "Security.CertFile"
	Key            string // the key's, e.g. "Security.KeyFile"
	CertWithoutKey string // the whole error when only the certificate is given
	KeyWithoutCert string // the whole error when only the key is given
}

// Config returns a config of TLS 1.2 or later that trusts f.CA (the system's roots when it is
// empty) and presents f.Cert with f.Key when both are given. insecureSkipVerify skips checking
// the server's certificate (an explicit testing option). Every file that cannot be used is one
// error of the joined error, named in w's words.
func Config(f Files, insecureSkipVerify bool, w Words) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecureSkipVerify} //nolint:gosec // an explicit testing option
	var errs []error
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", w.CA, err))
		case !pool.AppendCertsFromPEM(pem):
			errs = append(errs, fmt.Errorf("%s %s: no PEM certificate in it", w.CA, f.CA))
		default:
			tc.RootCAs = pool
		}
	}
	switch {
	case f.Cert != "" && f.Key != "":
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s, %s %s: %w", w.Cert, f.Cert, w.Key, f.Key, err))
		} else {
			tc.Certificates = []tls.Certificate{cert}
		}
	case f.Cert != "":
		errs = append(errs, errors.New(w.CertWithoutKey))
	case f.Key != "":
		errs = append(errs, errors.New(w.KeyWithoutCert))
	}
	return tc, errors.Join(errs...)
}
