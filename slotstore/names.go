package slotstore

import (
	"fmt"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// ValidateName reports whether name is acceptable as kind, which is "slot",
// "publication" or "table". The error wraps outbox.ErrBadName.
//
//   - slot: [a-z0-9_]{1,63}, the server's rule for replication slot names
//     (slotfacts.CheckSlotName).
//   - publication: [a-z_][a-z0-9_$]{0,62}, an identifier that reads the same
//     quoted or not (slotfacts.CheckPublicationName).
//   - table: "schema.table" or "table"; each part 1 to 63 bytes, without NUL,
//     taken literally (no case folding).
func ValidateName(kind, name string) error {
	switch kind {
	case "slot":
		return slotfacts.CheckSlotName(name)
	case "publication":
		return slotfacts.CheckPublicationName(name)
	case "table":
		if _, err := outbox.ParseTable(name); err != nil {
			return err
		}
		return nil
	}
	return fmt.Errorf("%w: unknown kind of name %q (want slot, publication or table)", outbox.ErrBadName, kind)
}
