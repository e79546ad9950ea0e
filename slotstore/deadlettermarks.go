package slotstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// DefaultDeadLetterMarksTable is where `cdc-relay dead-letters` keeps which letters of the
// dead-letter topic were replayed or discarded, keyed by (topic, partition, offset): a Kafka
// topic cannot be edited. Schema-qualified like the dead-letter table.
const DefaultDeadLetterMarksTable = "public.cdc_relay_dead_letter_marks"

func deadLetterMarksDDL(t outbox.Table) string {
	return `CREATE TABLE IF NOT EXISTS ` + t.Sanitize() + ` (
    topic        text         NOT NULL,
    "partition"  integer      NOT NULL,
    "offset"     bigint       NOT NULL,
    outbox_id    text,
    state        text         NOT NULL CHECK (state IN ('replayed', 'discarded')),
    marked_at    timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, "partition", "offset")
)`
}

// DeadLetterMarksTableDDL returns the statement that creates the marks table table
// ("schema.table" or "table", meaning public.table) if it is missing. The error wraps ErrBadName.
func DeadLetterMarksTableDDL(table string) (string, error) {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return "", fmt.Errorf("dead-letter marks %w", err)
	}
	return deadLetterMarksDDL(t), nil
}

// CreateDeadLetterMarksTable creates the marks table if it does not exist; a table that exists
// is left alone without running CREATE (a role with INSERT and SELECT on it is enough then).
func (s *Store) CreateDeadLetterMarksTable(ctx context.Context, table string) error {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return fmt.Errorf("dead-letter marks %w", err)
	}
	var exists bool
	if err := s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t.Sanitize()).Scan(&exists); err == nil && exists {
		return nil
	}
	_, err = s.conn.Exec(ctx, deadLetterMarksDDL(t))
	if c := pgCode(err); c == pgerrcode.UniqueViolation || c == pgerrcode.DuplicateTable { // created concurrently
		err = nil
	}
	if err != nil {
		if pgCode(err) == pgerrcode.InsufficientPrivilege {
			err = fmt.Errorf("%w: it needs CREATE on schema %q, or an owner runs once:\n%s;\n(and grants SELECT, INSERT on it): %w",
				ErrPermission, t.Schema, deadLetterMarksDDL(t), err)
		}
		return fmt.Errorf("create the dead-letter marks table %s: %w", t, err)
	}
	return nil
}

// deadLetterStateColumns are the columns MigrateDeadLetterTable adds to the dead-letter table:
// when `cdc-relay dead-letters` replayed or discarded a row.
var deadLetterStateColumns = []string{"replayed_at", "discarded_at"}

// MigrateDeadLetterTable adds the replay state columns (replayed_at, discarded_at, both
// timestamptz, NULL while the letter waits) to the dead-letter table if they are missing. It
// reports whether the table exists; a missing table is not an error (nothing was parked).
// ALTER runs only when a column is missing, so once migrated a role without ownership works.
func (s *Store) MigrateDeadLetterTable(ctx context.Context, table string) (bool, error) {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return false, fmt.Errorf("dead-letter %w", err)
	}
	var missing int
	var exists bool
	err = s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
		(SELECT count(*) FROM unnest($2::text[]) c
		  WHERE NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = c AND NOT attisdropped))`,
		t.Sanitize(), deadLetterStateColumns).Scan(&exists, &missing)
	if err != nil {
		return false, fmt.Errorf("inspect the dead-letter table %s: %w", t, err)
	}
	if !exists || missing == 0 {
		return exists, nil
	}
	stmt := `ALTER TABLE ` + t.Sanitize()
	for i, c := range deadLetterStateColumns {
		if i > 0 {
			stmt += ","
		}
		stmt += ` ADD COLUMN IF NOT EXISTS ` + pgx.Identifier{c}.Sanitize() + ` timestamptz`
	}
	if _, err := s.conn.Exec(ctx, stmt); err != nil {
		if pgCode(err) == pgerrcode.InsufficientPrivilege {
			err = fmt.Errorf("%w: only the table's owner may add the replay columns; have it run once:\n%s;\n: %w", ErrPermission, stmt, err)
		}
		return true, fmt.Errorf("migrate the dead-letter table %s: %w", t, err)
	}
	return true, nil
}
