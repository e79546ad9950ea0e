package slotstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// DefaultDeadLetterTable is the table where the relay parks a record that Kafka refused for
// good when the dead-letter topic refuses it too (e.g. a payload larger than any topic
// accepts): the last resort before the relay would have to stop. Rows are never deleted by the
// relay. The name is schema-qualified, so it does not depend on a connection's search_path.
const DefaultDeadLetterTable = "public.cdc_relay_dead_letters"

// sequence returns "schema.table_id_seq", the id sequence the dead-letter table's bigserial
// column creates (PostgreSQL shortens it when the table name is long).
func sequence(t outbox.Table) string { return t.String() + "_id_seq" }

// DeadLetterTableDDL returns the statement that creates the dead-letter table table
// ("schema.table" or "table", meaning public.table) if it is missing. It is run by
// `slot create` and, on first use, by the relay. The error wraps ErrBadName.
func DeadLetterTableDDL(table string) (string, error) {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return "", fmt.Errorf("dead-letter %w", err)
	}
	return deadLetterDDL(t), nil
}

func deadLetterDDL(t outbox.Table) string {
	return `CREATE TABLE IF NOT EXISTS ` + t.Sanitize() + ` (
    id          bigserial    PRIMARY KEY,
    slot        text         NOT NULL,
    outbox_id   text,
    topic       text,
    key         bytea,
    value       bytea,
    headers     jsonb,
    error       text         NOT NULL,
    class       text,
    lsn         pg_lsn,
    created_at  timestamptz  NOT NULL DEFAULT now()
)`
}

// CreateDeadLetterTable creates the dead-letter table table ("schema.table" or "table",
// meaning public.table; DefaultDeadLetterTable normally) if it does not exist. The name is
// always schema-qualified, whatever the connection's search_path. Two relays racing to create
// it are both fine.
//
// A table that exists already is left alone without running CREATE, so a role without CREATE
// on the schema works once an owner has made the table (least privilege: the relay then needs
// only INSERT on it and USAGE on its id sequence).
func (s *Store) CreateDeadLetterTable(ctx context.Context, table string) error {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return fmt.Errorf("dead-letter %w", err)
	}
	var exists bool
	err = s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t.Sanitize()).Scan(&exists)
	if err == nil && exists {
		return nil
	}
	_, err = s.conn.Exec(ctx, deadLetterDDL(t))
	if c := pgCode(err); c == pgerrcode.UniqueViolation || c == pgerrcode.DuplicateTable { // created concurrently
		err = nil
	}
	if err != nil {
		switch pgCode(err) {
		case pgerrcode.InsufficientPrivilege:
			var role string
			_ = s.conn.QueryRow(ctx, `SELECT current_user`).Scan(&role)
			r := pgx.Identifier{role}.Sanitize()
			err = fmt.Errorf("%w: role %q cannot create it: it needs CREATE on schema %q (GRANT CREATE ON SCHEMA %s TO %s), "+
				"or an owner creates the table once and grants INSERT on it and USAGE on its id sequence %s to %s: %w",
				ErrPermission, role, t.Schema, pgx.Identifier{t.Schema}.Sanitize(), r, sequence(t), r, err)
		case pgerrcode.InvalidSchemaName:
			err = fmt.Errorf("schema %q does not exist: create it, or name another schema in --dead-letter-table: %w", t.Schema, err)
		}
		return fmt.Errorf("create the dead-letter table %s: %w", t, err)
	}
	return nil
}
