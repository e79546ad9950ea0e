package deadletters

import (
	"context"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// DefaultMarksTable is where `cdc-relay dead-letters` keeps which letters of the
// dead-letter topic were replayed or discarded (a Kafka topic cannot be edited), keyed by what
// the letter is: the topic's name and topic ID (a topic deleted and re-created under the same
// name has a new ID and reuses offsets), partition, offset and the record's timestamp
// (letter_time); lsn is its cdc-lsn. Schema-qualified like the dead-letter table.
//
// Marks written before topic_id and letter_time existed have topic_id ” and letter_time
// -infinity (CreateMarksTable migrates them): `dead-letters` applies one to the letter at its
// offset only if the outbox id is the same and the mark is not older than the letter.
const DefaultMarksTable = "public.cdc_relay_dead_letter_marks"

func marksDDL(t outbox.Table) string {
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

// marksMigration turns a marks table of the version keyed by (topic, partition,
// offset) into the current one (pkey: the name of its primary key); the old marks keep
// topic_id ” and letter_time -infinity.
func marksMigration(t outbox.Table, pkey string) string {
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

// MarksTableDDL returns the statement that creates the marks table table ("schema.table" or
// "table", meaning public.table) if it is missing. The error wraps outbox.ErrBadName.
func MarksTableDDL(table string) (string, error) {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return "", fmt.Errorf("dead-letter marks %w", err)
	}
	return marksDDL(t), nil
}

// CreateMarksTable creates the marks table on conn if it does not exist, and migrates one of
// the version keyed by (topic, partition, offset) (that takes its owner); a current table is
// left alone without running DDL (a role with INSERT and SELECT on it is enough then). A
// refused statement wraps slotstore.slotstore.ErrPermission and gives the statement for the owner.
func CreateMarksTable(ctx context.Context, conn *pgx.Conn, table string) error {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return fmt.Errorf("dead-letter marks %w", err)
	}
	var exists, current bool
	err = conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'letter_time' AND NOT attisdropped)`,
		t.Sanitize()).Scan(&exists, &current)
	if err == nil && exists && current {
		return nil
	}
	if err == nil && exists {
		var pkey string
		err := conn.QueryRow(ctx, `SELECT coalesce((SELECT conname FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'), '')`,
			t.Sanitize()).Scan(&pkey)
		if err != nil {
			return fmt.Errorf("inspect the dead-letter marks table %s: %w", t, err)
		}
		stmt := marksMigration(t, pkey)
		if _, err := conn.Exec(ctx, stmt); err != nil {
			if slotfacts.Code(err) == pgerrcode.InsufficientPrivilege {
				err = fmt.Errorf("%w: only the table's owner may migrate it; have it run once:\n%s;\n: %w", slotstore.ErrPermission, stmt, err)
			}
			return fmt.Errorf("migrate the dead-letter marks table %s: %w", t, err)
		}
		return nil
	}
	_, err = conn.Exec(ctx, marksDDL(t))
	if c := slotfacts.Code(err); c == pgerrcode.UniqueViolation || c == pgerrcode.DuplicateTable { // created concurrently
		err = nil
	}
	if err != nil {
		if slotfacts.Code(err) == pgerrcode.InsufficientPrivilege {
			err = fmt.Errorf("%w: it needs CREATE on schema %q, or an owner runs once:\n%s;\n(and grants SELECT, INSERT on it): %w",
				slotstore.ErrPermission, t.Schema, marksDDL(t), err)
		}
		return fmt.Errorf("create the dead-letter marks table %s: %w", t, err)
	}
	return nil
}
