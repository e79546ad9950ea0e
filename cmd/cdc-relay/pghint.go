package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgConnectHint says what to check after a failed PostgreSQL connection, from the cause.
func pgConnectHint(err error) string {
	var (
		pgErr    *pgconn.PgError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "28P01":
		return "the server refused the password: check --pg-password-file (or the URL's password) and the user name"
	case errors.As(err, &pgErr) && pgErr.Code == "28000":
		return "the server's pg_hba.conf refuses this user, database, address or encryption: check the user, and the URL's sslmode " +
			"(a hostssl rule needs sslmode=verify-full, verify-ca or require)"
	case errors.As(err, &unknown):
		return "the server's certificate is not signed by a CA the relay trusts: set sslrootcert in the URL to the CA file that signed it"
	case errors.As(err, &hostname):
		return "the server's certificate does not name the host of the URL: connect by a name the certificate lists, or fix the certificate"
	case errors.As(err, &invalid), errors.As(err, &verify):
		return "the server's certificate was refused: check sslrootcert, the certificate's validity and its names"
	case errors.As(err, &header):
		return "the server did not answer with TLS: check the host and port"
	}
	return "check that the server runs and that the URL's host, port, user, password and database are right"
}
