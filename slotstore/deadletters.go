package slotstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// DeadLetterTable is the table where the relay parks a record that Kafka refused for good
// when the dead-letter topic refuses it too (e.g. a payload larger than any topic accepts):
// the last resort before the relay would have to stop. Rows are never deleted by the relay.
const DeadLetterTable = "cdc_relay_dead_letters"

// DeadLetterTableDDL creates DeadLetterTable if it is missing. It is run by `slot create` and,
// on first use, by the relay.
const DeadLetterTableDDL = `CREATE TABLE IF NOT EXISTS ` + DeadLetterTable + ` (
    id          bigserial    PRIMARY KEY,
    slot        text         NOT NULL,
    outbox_id   text,
    topic       text,
    key         bytea,
    value       bytea,
    headers     jsonb,
    error       text         NOT NULL,
    lsn         pg_lsn,
    created_at  timestamptz  NOT NULL DEFAULT now()
)`

// CreateDeadLetterTable creates DeadLetterTable (in the first schema of the search_path,
// normally public) if it does not exist. Two relays racing to create it are both fine.
//
// A table that exists already is left alone without running CREATE, so a role without CREATE
// on the schema works once an owner has made the table (least privilege: the relay then needs
// only INSERT on it and USAGE on its id sequence).
func (s *Store) CreateDeadLetterTable(ctx context.Context) error {
	var exists bool
	err := s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, DeadLetterTable).Scan(&exists)
	if err == nil && exists {
		return nil
	}
	_, err = s.conn.Exec(ctx, DeadLetterTableDDL)
	if c := pgCode(err); c == "23505" || c == "42P07" { // created concurrently
		err = nil
	}
	if err != nil {
		if pgCode(err) == codeInsufficientPrivilege {
			var role, schema string
			_ = s.conn.QueryRow(ctx, `SELECT current_user, coalesce(current_schema(), 'public')`).Scan(&role, &schema)
			err = fmt.Errorf("%w: role %q cannot create it: it needs CREATE on schema %q (GRANT CREATE ON SCHEMA %s TO %s), "+
				"or an owner creates the table once and grants INSERT on it and USAGE on its id sequence to %s: %w",
				ErrPermission, role, schema, pgx.Identifier{schema}.Sanitize(), pgx.Identifier{role}.Sanitize(), pgx.Identifier{role}.Sanitize(), err)
		}
		return fmt.Errorf("create the dead-letter table %s: %w", DeadLetterTable, err)
	}
	return nil
}
