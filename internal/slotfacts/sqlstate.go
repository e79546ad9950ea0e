package slotfacts

import (
	"errors"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// Code returns the SQLSTATE of err, or "" when it is not a server error.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// ServerSays returns the sentinel that a server error means for a slot: ErrSlotActive for
// object_in_use ("replication slot ... is active for PID ..."), ErrSlotMissing for
// undefined_object about a replication slot, ErrSlotLost for object_not_in_prerequisite_state
// "can no longer get changes from replication slot"; nil for any other error.
func ServerSays(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	switch {
	case pgErr.Code == pgerrcode.ObjectInUse:
		return ErrSlotActive
	case pgErr.Code == pgerrcode.UndefinedObject && strings.Contains(pgErr.Message, "replication slot"):
		return ErrSlotMissing
	case pgErr.Code == pgerrcode.ObjectNotInPrerequisiteState && strings.Contains(pgErr.Message, "can no longer get changes"):
		return ErrSlotLost
	}
	return nil
}
