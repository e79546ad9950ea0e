package deadletters

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// DefaultTable is the table where the relay parks a record that Kafka refused for good when
// the dead-letter topic refuses it too (e.g. a payload larger than any topic accepts): the
// last resort before the relay would have to stop. Rows are never deleted by the relay. The
// name is schema-qualified, so it does not depend on a connection's search_path.
const DefaultTable = "public.cdc_relay_dead_letters"

// sequence returns "schema.table_id_seq", the id sequence the dead-letter table's bigserial
// column creates (PostgreSQL shortens it when the table name is long).
func sequence(t outbox.Table) string { return t.String() + "_id_seq" }

// TableDDL returns the statement that creates the dead-letter table table ("schema.table" or
// "table", meaning public.table) if it is missing. It is run by `slot create` and, on first
// use, by the relay. The error wraps outbox.ErrBadName.
func TableDDL(table string) (string, error) {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return "", fmt.Errorf("dead-letter %w", err)
	}
	return tableDDL(t), nil
}

func tableDDL(t outbox.Table) string {
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

// CreateTable creates the dead-letter table table ("schema.table" or "table", meaning
// public.table; DefaultTable normally) on conn if it does not exist. The name is always
// schema-qualified, whatever the connection's search_path. Two relays racing to create it are
// both fine.
//
// A table that exists already is left alone without running CREATE, so a role without CREATE
// on the schema works once an owner has made the table (least privilege: the relay then needs
// only INSERT on it and USAGE on its id sequence). A refused CREATE wraps
// slotstore.ErrPermission and names the grants.
func CreateTable(ctx context.Context, conn *pgx.Conn, table string) error {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return fmt.Errorf("dead-letter %w", err)
	}
	var exists bool
	err = conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t.Sanitize()).Scan(&exists)
	if err == nil && exists {
		return nil
	}
	_, err = conn.Exec(ctx, tableDDL(t))
	if c := slotfacts.Code(err); c == pgerrcode.UniqueViolation || c == pgerrcode.DuplicateTable { // created concurrently
		err = nil
	}
	if err != nil {
		switch slotfacts.Code(err) {
		case pgerrcode.InsufficientPrivilege:
			var role string
			_ = conn.QueryRow(ctx, `SELECT current_user`).Scan(&role)
			r := pgx.Identifier{role}.Sanitize()
			err = fmt.Errorf("%w: role %q cannot create it: it needs CREATE on schema %q (GRANT CREATE ON SCHEMA %s TO %s), "+
				"or an owner creates the table once and grants INSERT on it and USAGE on its id sequence %s to %s: %w",
				slotstore.ErrPermission, role, t.Schema, pgx.Identifier{t.Schema}.Sanitize(), r, sequence(t), r, err)
		case pgerrcode.InvalidSchemaName:
			err = fmt.Errorf("schema %q does not exist: create it, or name another schema in --dead-letter-table: %w", t.Schema, err)
		}
		return fmt.Errorf("create the dead-letter table %s: %w", t, err)
	}
	return nil
}

// stateColumns are the columns MigrateTable adds to the dead-letter table: when `cdc-relay
// dead-letters` replayed or discarded a row, and the letter's class (why it was parked,
// record.LetterClass; NULL in rows an older relay wrote, whose headers may still carry
// dlq-class).
var stateColumns = []string{"replayed_at", "discarded_at", "class"}

var stateTypes = map[string]string{"replayed_at": "timestamptz", "discarded_at": "timestamptz", "class": "text"}

// MigrateTable adds the replay state columns (replayed_at, discarded_at, both timestamptz,
// NULL while the letter waits) and class (text) to the dead-letter table if they are missing;
// old rows keep NULL in them. It reports whether the table exists; a missing table is not an
// error (nothing was parked). ALTER runs only when a column is missing, so once migrated a
// role without ownership works.
func MigrateTable(ctx context.Context, conn *pgx.Conn, table string) (bool, error) {
	t, err := outbox.ParseTable(table)
	if err != nil {
		return false, fmt.Errorf("dead-letter %w", err)
	}
	var missing int
	var exists bool
	err = conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
		(SELECT count(*) FROM unnest($2::text[]) c
		  WHERE NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = c AND NOT attisdropped))`,
		t.Sanitize(), stateColumns).Scan(&exists, &missing)
	if err != nil {
		return false, fmt.Errorf("inspect the dead-letter table %s: %w", t, err)
	}
	if !exists || missing == 0 {
		return exists, nil
	}
	stmt := `ALTER TABLE ` + t.Sanitize()
	for i, c := range stateColumns {
		if i > 0 {
			stmt += ","
		}
		stmt += ` ADD COLUMN IF NOT EXISTS ` + pgx.Identifier{c}.Sanitize() + ` ` + stateTypes[c]
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		if slotfacts.Code(err) == pgerrcode.InsufficientPrivilege {
			err = fmt.Errorf("%w: only the table's owner may add the replay columns; have it run once:\n%s;\n: %w", slotstore.ErrPermission, stmt, err)
		}
		return true, fmt.Errorf("migrate the dead-letter table %s: %w", t, err)
	}
	return true, nil
}

// TableWriter inserts letters into the dead-letter table over one connection (the relay's
// last resort, DESIGN.md "Last-resort dead letters"). It does not own the connection and is
// used by one goroutine at a time.
type TableWriter struct {
	conn     *pgx.Conn
	table    outbox.Table
	hasClass bool // the table has the class column (tables made before it lack it until migrated)
}

// OpenTableWriter creates the dead-letter table on conn if it is missing (CreateTable) and
// learns whether it has the class column: a table made by an older version has none until
// `dead-letters` migrates it (that needs its owner); the dlq-class header in headers says it then.
func OpenTableWriter(ctx context.Context, conn *pgx.Conn, table outbox.Table) (*TableWriter, error) {
	if err := CreateTable(ctx, conn, table.String()); err != nil {
		return nil, err
	}
	w := &TableWriter{conn: conn, table: table}
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'class' AND NOT attisdropped)`,
		table.Sanitize()).Scan(&w.hasClass)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Insert writes rec, a dead-letter record (the original key, value and headers plus the dlq-*
// headers) that the dead-letter topic refused with refusal, as a row of slot, and returns once
// the row is committed. Text that PostgreSQL would refuse (NUL bytes, invalid UTF-8) is
// replaced, so that no letter is retried forever for it.
func (w *TableWriter) Insert(ctx context.Context, slot string, rec *kgo.Record, refusal error) error {
	hdrs := make(map[string]string, len(rec.Headers))
	for _, h := range rec.Headers {
		if _, dup := hdrs[h.Key]; !dup {
			hdrs[pgText(h.Key)] = pgText(string(h.Value))
		}
	}
	hj, err := json.Marshal(hdrs)
	if err != nil {
		return err
	}
	msg := pgText(fmt.Sprintf("%s; dead-letter topic %s refused it too: %v", record.Header(rec, record.HeaderDLQError), rec.Topic, refusal))
	var lsn *string
	if v := record.Header(rec, record.HeaderLSN); v != nil {
		s := pgText(string(v))
		lsn = &s
	}
	args := []any{slot, pgText(string(record.Header(rec, record.HeaderOutboxID))), pgText(string(record.Header(rec, record.HeaderDLQTopic))), rec.Key, rec.Value, string(hj), msg, lsn}
	cols, vals := `slot, outbox_id, topic, key, value, headers, error, lsn`, `$1, $2, $3, $4, $5, $6::jsonb, $7, $8::pg_lsn`
	if w.hasClass {
		cols, vals = cols+`, class`, vals+`, $9`
		args = append(args, pgText(string(record.Header(rec, record.HeaderDLQClass))))
	}
	_, err = w.conn.Exec(ctx, `INSERT INTO `+w.table.Sanitize()+` (`+cols+`) VALUES (`+vals+`)`, args...)
	if err != nil {
		return fmt.Errorf("insert into %s: %w", w.table, err)
	}
	return nil
}

// pgText makes s storable in a text or jsonb column: PostgreSQL refuses NUL bytes (and jsonb
// the \u0000 escape) and invalid UTF-8, and a letter refused for that would be retried forever.
// The key and value go to bytea columns unchanged.
func pgText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
