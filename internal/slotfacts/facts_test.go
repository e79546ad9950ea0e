package slotfacts

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
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

// What the server says about a slot, by SQLSTATE and, where one code means several things,
// the words of its message; anything else is nobody's sentinel.
func TestServerSays(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{&pgconn.PgError{Code: pgerrcode.ObjectInUse, Message: `replication slot "s" is active for PID 7`}, ErrSlotActive},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: pgerrcode.UndefinedObject, Message: `replication slot "s" does not exist`}), ErrSlotMissing},
		{&pgconn.PgError{Code: pgerrcode.ObjectNotInPrerequisiteState, Message: `can no longer get changes from replication slot "s"`}, ErrSlotLost},
		{&pgconn.PgError{Code: pgerrcode.UndefinedObject, Message: `publication "p" does not exist`}, nil},
		{&pgconn.PgError{Code: pgerrcode.ObjectNotInPrerequisiteState, Message: "something else"}, nil},
		{&pgconn.PgError{Code: pgerrcode.InsufficientPrivilege}, nil},
		{errors.New("connection reset"), nil},
	} {
		if got := ServerSays(tc.err); got != tc.want {
			t.Errorf("ServerSays(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if got := Code(fmt.Errorf("x: %w", &pgconn.PgError{Code: pgerrcode.DiskFull})); got != pgerrcode.DiskFull {
		t.Errorf("Code = %q, want %q", got, pgerrcode.DiskFull)
	}
	if got := Code(errors.New("x")); got != "" {
		t.Errorf("Code of a non-server error = %q, want \"\"", got)
	}
}
