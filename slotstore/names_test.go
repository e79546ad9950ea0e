package slotstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

func TestValidateName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63)
	for _, tc := range []struct {
		kind, name string
		ok         bool
	}{
		{"slot", "cdc_relay", true},
		{"slot", "0slot_1", true},
		{"slot", long, true},
		{"slot", long + "a", false},
		{"slot", "", false},
		{"slot", "Cdc", false},
		{"slot", "cdc-relay", false},
		{"slot", "cdc relay", false},
		{"slot", "x'; DROP TABLE t; --", false},
		{"publication", "cdc_pub", true},
		{"publication", "_p1", true},
		{"publication", long, true},
		{"publication", long + "a", false},
		{"publication", "1pub", false},
		{"publication", "pub$1", true}, // PostgreSQL's rule: $ after the first character
		{"publication", "$pub", false},
		{"publication", "Pub", false},
		{"publication", `p"q`, false},
		{"publication", "", false},
		{"table", "outbox", true},
		{"table", "public.outbox", true},
		{"table", "Sales.Outbox", true},
		{"table", "a.b.c", false},
		{"table", ".outbox", false},
		{"table", "public.", false},
		{"table", "", false},
		{"table", "bad\x00name", false},
		{"table", "public." + long + "a", false},
		{"index", "x", false},
	} {
		err := slotstore.ValidateName(tc.kind, tc.name)
		if tc.ok && err != nil {
			t.Errorf("ValidateName(%q, %q) = %v, want nil", tc.kind, tc.name, err)
		}
		if !tc.ok && !errors.Is(err, outbox.ErrBadName) {
			t.Errorf("ValidateName(%q, %q) = %v, want ErrBadName", tc.kind, tc.name, err)
		}
	}
}
