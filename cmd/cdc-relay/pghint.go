package main

import (
	"errors"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cdc-relay/cdc-relay/internal/tlshint"
)

// pgTLSWords are PostgreSQL's words in the TLS hints.
var pgTLSWords = tlshint.Words{Peer: "server", CA: "sslrootcert in the URL",
	Name: "host of the URL: connect by a name the certificate lists, or fix the certificate", NotTLS: "check the host and port"}

// pgConnectHint says what to check after a failed PostgreSQL connection, from the cause.
func pgConnectHint(err error) string {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InvalidPassword:
		return "the server refused the password: check --pg-password-file (or the URL's password) and the user name"
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InvalidCatalogName:
		return "the URL's database does not exist on this server: check the URL's path (postgres://USER@HOST:5432/DATABASE, " +
			"or dbname=), or create it"
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InvalidAuthorizationSpecification:
		return "the server's pg_hba.conf refuses this user, database, address or encryption: check the user, and the URL's sslmode " +
			"(a hostssl rule needs sslmode=verify-full, verify-ca or require)"
	}
	if hint := tlshint.Hint(err, pgTLSWords); hint != "" {
		return hint
	}
	return "check that the server runs and that the URL's host, port, user, password and database are right"
}
