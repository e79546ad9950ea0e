package slotfacts

import (
	"errors"
	"fmt"
)

// ErrBadName means a slot, publication or table name is not acceptable. outbox.ErrBadName,
// the error of outbox.ParseTable, is the same value.
var ErrBadName = errors.New("invalid name")

// MaxIdentLen is NAMEDATALEN-1, the longest name the server keeps.
const MaxIdentLen = 63

// CheckSlotName accepts a replication slot name: 1 to 63 characters of a-z, 0-9 and _, the
// server's own rule (ReplicationSlotValidateName). The error wraps ErrBadName.
func CheckSlotName(name string) error {
	if !validName(name, false) {
		return fmt.Errorf("slot %q: %w: a replication slot name is 1 to %d characters of a-z, 0-9 and _",
			name, ErrBadName, MaxIdentLen)
	}
	return nil
}

// CheckPublicationName accepts a publication name that means the same publication quoted
// and unquoted (in psql, in DDL quoted with pgx.Identifier, and in pgoutput's
// publication_names option, which folds an unquoted name to lower case): PostgreSQL's rule for
// an unquoted identifier, restricted to ASCII lower case. It begins with a-z or _, and goes on
// with a-z, 0-9, _ and $ (a $ is part of an identifier after its first character, never the
// start of a parameter or a dollar quote there), 1 to 63 bytes. The error wraps ErrBadName.
func CheckPublicationName(name string) error {
	if !validName(name, true) {
		return fmt.Errorf("publication %q: %w: a publication name is 1 to %d characters of a-z, 0-9, _ and $, "+
			"starting with a letter or _", name, ErrBadName, MaxIdentLen)
	}
	return nil
}

// validName reports whether s is 1..63 of [a-z0-9_]; an identifier (ident) may also hold $,
// and neither a digit nor $ may start it.
func validName(s string, ident bool) bool {
	if len(s) == 0 || len(s) > MaxIdentLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9', ident && c == '$':
			if ident && i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}
