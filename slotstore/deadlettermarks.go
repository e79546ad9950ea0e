package slotstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// DefaultDeadLetterMarksTable is where `cdc-relay dead-letters` keeps which letters of the
// dead-letter topic were replayed or discarded (a Kafka topic cannot be edited), keyed by what
// the letter is: the topic's name and topic ID (a topic deleted and re-created under the same
// name has a new ID and reuses offsets), partition, offset and the record's timestamp
// (letter_time); lsn is its cdc-lsn. Schema-qualified like the dead-letter table.
//
// Marks written before topic_id and letter_time existed have topic_id ” and letter_time
// -infinity (MigrateDeadLetterMarksTable): `dead-letters` applies one to the letter at its
// offset only if the outbox id is the same and the mark is not older than the letter.
const DefaultDeadLetterMarksTable = "public.cdc_relay_dead_letter_marks"

func deadLetterMarksDDL(t outbox.Table) string {
	return `CREATE TABLE IF NOT EXISTS ` + t.Sanitize() + ` (
    topic        text         NOT NULL,
    topic_id     text         NOT NULL DEFAULT '',
    "partition"  integer      NOT NULL,
    "offset"     bigint       NOT NULL,
    letter_time  timestamptz  NOT NULL DEFAULT '-infinity',
    outbox_id    text,
    lsn          text,
    state        text         NOT NULL CHECK (state IN ('replayed', 'discarded')),
    marked_at    timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, topic_id, "partition", "offset", letter_time)
)`
}

// deadLetterMarksMigration turns a marks table of the version keyed by (topic, partition,
// offset) into the current one (pkey: the name of its primary key); the old marks keep
// topic_id ” and letter_time -infinity.
func deadLetterMarksMigration(t outbox.Table, pkey string) string {
	drop := ""
	if pkey != "" {
		drop = `
    DROP CONSTRAINT ` + pgx.Identifier{pkey}.Sanitize() + `,`
	}
	return `ALTER TABLE ` + t.Sanitize() + `
    ADD COLUMN IF NOT EXISTS topic_id text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS letter_time timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN IF NOT EXISTS lsn text,` + drop + `
    ADD PRIMARY KEY (topic, topic_id, "partition", "offset", letter_time)`
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

// CreateDeadLetterMarksTable creates the marks table if it does not exist, and migrates one
// of the version keyed by (topic, partition, offset) (that takes its owner); a current table is
// left alone without running DDL (a role with INSERT and SELECT on it is enough then).
func (s *Store) CreateDeadLetterMarksTable(ctx context.Context, table string) error {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return fmt.Errorf("dead-letter marks %w", err)
	}
	var exists, current bool
	err = s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'letter_time' AND NOT attisdropped)`,
		t.Sanitize()).Scan(&exists, &current)
	if err == nil && exists && current {
		return nil
	}
	if err == nil && exists {
		var pkey string
		err := s.conn.QueryRow(ctx, `SELECT coalesce((SELECT conname FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'), '')`,
			t.Sanitize()).Scan(&pkey)
		if err != nil {
			return fmt.Errorf("inspect the dead-letter marks table %s: %w", t, err)
		}
		stmt := deadLetterMarksMigration(t, pkey)
		if _, err := s.conn.Exec(ctx, stmt); err != nil {
			if pgCode(err) == pgerrcode.InsufficientPrivilege {
				err = fmt.Errorf("%w: only the table's owner may migrate it; have it run once:\n%s;\n: %w", ErrPermission, stmt, err)
			}
			return fmt.Errorf("migrate the dead-letter marks table %s: %w", t, err)
		}
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
// when `cdc-relay dead-letters` replayed or discarded a row, and the letter's class (why it
// was parked, sink.LetterClass; NULL in rows an older relay wrote, whose headers may still
// carry dlq-class).
var deadLetterStateColumns = []string{"replayed_at", "discarded_at", "class"}

var deadLetterStateTypes = map[string]string{"replayed_at": "timestamptz", "discarded_at": "timestamptz", "class": "text"}

// MigrateDeadLetterTable adds the replay state columns (replayed_at, discarded_at, both
// timestamptz, NULL while the letter waits) and class (text) to the dead-letter table if they
// are missing; old rows keep NULL in them. It reports whether the table exists; a missing
// table is not an error (nothing was parked). ALTER runs only when a column is missing, so
// once migrated a role without ownership works.
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
		stmt += ` ADD COLUMN IF NOT EXISTS ` + pgx.Identifier{c}.Sanitize() + ` ` + deadLetterStateTypes[c]
	}
	if _, err := s.conn.Exec(ctx, stmt); err != nil {
		if pgCode(err) == pgerrcode.InsufficientPrivilege {
			err = fmt.Errorf("%w: only the table's owner may add the replay columns; have it run once:\n%s;\n: %w", ErrPermission, stmt, err)
		}
		return true, fmt.Errorf("migrate the dead-letter table %s: %w", t, err)
	}
	return true, nil
}
