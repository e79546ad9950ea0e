package slotstore

import (
	"fmt"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// maxIdentLen is NAMEDATALEN-1, the longest name the server keeps.
const maxIdentLen = 63

// ValidateName reports whether name is acceptable as kind, which is "slot",
// "publication" or "table". The error wraps ErrBadName.
//
//   - slot: [a-z0-9_]{1,63}, the server's rule for replication slot names.
//   - publication: [a-z_][a-z0-9_]{0,62}, an identifier that reads the same
//     quoted or not.
//   - table: "schema.table" or "table"; each part 1 to 63 bytes, without NUL,
//     taken literally (no case folding).
func ValidateName(kind, name string) error {
	switch kind {
	case "slot":
		if !simpleName(name, false) {
			return fmt.Errorf("slot %q: %w: a replication slot name is 1 to %d characters of a-z, 0-9 and _",
				name, ErrBadName, maxIdentLen)
		}
	case "publication":
		if !simpleName(name, true) {
			return fmt.Errorf("publication %q: %w: a publication name is 1 to %d characters of a-z, 0-9 and _, "+
				"not starting with a digit", name, ErrBadName, maxIdentLen)
		}
	case "table":
		if _, err := outbox.ParseTable(name); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown kind of name %q (want slot, publication or table)", ErrBadName, kind)
	}
	return nil
}

// simpleName reports whether s is 1..63 of [a-z0-9_]; with ident, it must
// not start with a digit either.
func simpleName(s string, ident bool) bool {
	if len(s) == 0 || len(s) > maxIdentLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9':
			if ident && i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}
