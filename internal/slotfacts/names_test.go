package slotfacts

import (
	"errors"
	"strings"
	"testing"
)

// One rule for each kind of name, which replication's Config.Validate and slotstore's
// ValidateName both call. A publication name may hold $ after its first character, as any
// unquoted PostgreSQL identifier may: slotstore refused such a name that the stream accepted.
func TestNameRules(t *testing.T) {
	long := strings.Repeat("a", MaxIdentLen)
	for _, tc := range []struct {
		name     string
		slot, pb bool
	}{
		{"cdc_relay", true, true},
		{"_p1", true, true},
		{"0slot_1", true, false}, // a slot may start with a digit, an identifier may not
		{long, true, true},
		{long + "a", false, false},
		{"", false, false},
		{"Cdc", false, false},
		{"cdc-relay", false, false},
		{"cdc relay", false, false},
		{"x'; DROP TABLE t; --", false, false},
		{`p"q`, false, false},
		{"pub$1", false, true},
		{"a$$b", false, true},
		{"$pub", false, false}, // a $ first starts a parameter or a dollar quote
		{"1pub", true, false},
		{"pub,other", false, false},
	} {
		if err := CheckSlotName(tc.name); (err == nil) != tc.slot || (err != nil && !errors.Is(err, ErrBadName)) {
			t.Errorf("CheckSlotName(%q) = %v, want ok %v (else ErrBadName)", tc.name, err, tc.slot)
		}
		if err := CheckPublicationName(tc.name); (err == nil) != tc.pb || (err != nil && !errors.Is(err, ErrBadName)) {
			t.Errorf("CheckPublicationName(%q) = %v, want ok %v (else ErrBadName)", tc.name, err, tc.pb)
		}
	}
}
