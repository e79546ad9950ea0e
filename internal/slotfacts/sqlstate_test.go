package slotfacts

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

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
