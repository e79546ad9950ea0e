package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// A refused password and a missing database each get their own hint, not the generic one.
func TestPGConnectHintNamesTheCause(t *testing.T) {
	for code, want := range map[string]string{
		pgerrcode.InvalidPassword:    "refused the password",
		pgerrcode.InvalidCatalogName: "database does not exist",
	} {
		err := fmt.Errorf("connect: %w", &pgconn.PgError{Code: code})
		if got := pgConnectHint(err); !strings.Contains(got, want) {
			t.Errorf("SQLSTATE %s: hint %q, want %q", code, got, want)
		}
	}
}
