package slotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// Store manages replication slots and publications over one normal
// (non-replication) connection. It does not own the connection: the caller
// opens and closes it. A Store is used by one goroutine at a time.
type Store struct {
	conn *pgx.Conn
}

// New returns a Store that runs its statements on conn.
func New(conn *pgx.Conn) *Store {
	return &Store{conn: conn}
}

// pgCode returns the SQLSTATE of err, or "" when it is not a server error.
func pgCode(err error) string { return slotfacts.Code(err) }

// session describes the connected role and database.
type session struct {
	Role        string
	Super       bool
	Replication bool
	Database    string
	CanCreate   bool // CREATE on the current database
	WalLevel    string
}

func (s *Store) session(ctx context.Context) (session, error) {
	var ss session
	err := s.conn.QueryRow(ctx, `
SELECT current_user::text, r.rolsuper, r.rolreplication, current_database()::text,
       has_database_privilege(current_database(), 'CREATE'), current_setting('wal_level')
FROM pg_roles r WHERE r.rolname = current_user`).Scan(
		&ss.Role, &ss.Super, &ss.Replication, &ss.Database, &ss.CanCreate, &ss.WalLevel)
	if err != nil {
		return session{}, fmt.Errorf("read role and settings: %w", err)
	}
	return ss, nil
}

// checkWalLevel returns ErrWalLevel unless wal_level is logical.
func (ss session) checkWalLevel() error {
	if ss.WalLevel == "logical" {
		return nil
	}
	return fmt.Errorf("%w: the server runs with wal_level = %s; set wal_level = logical in postgresql.conf "+
		"(or run ALTER SYSTEM SET wal_level = logical as a superuser) and restart PostgreSQL", ErrWalLevel, ss.WalLevel)
}

// checkReplication returns ErrPermission unless the role may use
// replication slots (SUPERUSER or the REPLICATION attribute). what says what
// it was about to do, e.g. "create slot".
func (ss session) checkReplication(slot, what string) error {
	if ss.Super || ss.Replication {
		return nil
	}
	return replicationDenied(slot, what, ss.Role)
}

func replicationDenied(slot, what, role string) error {
	return fmt.Errorf("slot %q: %w: role %q cannot %s: it needs the REPLICATION attribute (or SUPERUSER); "+
		"as a superuser run: ALTER ROLE %s REPLICATION", slot, ErrPermission, role, what, pgx.Identifier{role}.Sanitize())
}

// slotRow is a row of pg_replication_slots.
type slotRow = slotfacts.Slot

// lookupSlot reads the slot (slotfacts.Lookup, the query the stream uses too); found is false
// when it does not exist.
func (s *Store) lookupSlot(ctx context.Context, slot string) (row slotRow, found bool, err error) {
	return slotfacts.Lookup(ctx, s.conn.PgConn(), slot)
}

// checkSlotKind returns ErrSlotWrongPlugin unless the slot is a logical
// pgoutput slot, and ErrSlotWrongDatabase unless it belongs to database db.
func checkSlotKind(slot, slotType, plugin, slotDB, db string) error {
	if slotType != "logical" {
		return fmt.Errorf("slot %q: %w: it is a %s slot, which may belong to a standby or another tool; "+
			"choose another slot name, or drop it (cdc-relay slot drop --slot %s) if nothing uses it",
			slot, ErrSlotWrongPlugin, slotType, slot)
	}
	if plugin != "pgoutput" {
		return fmt.Errorf("slot %q: %w: it uses the %q plugin and may belong to another tool; "+
			"choose another slot name, or drop it (cdc-relay slot drop --slot %s) if nothing uses it",
			slot, ErrSlotWrongPlugin, plugin, slot)
	}
	if slotDB != db {
		return fmt.Errorf("slot %q: %w: it was created in database %q, not %q; connect to %q or choose another slot name",
			slot, ErrSlotWrongDatabase, slotDB, db, slotDB)
	}
	return nil
}

// pubRow is a row of pg_publication with its tables.
type pubRow struct {
	AllTables bool
	Publish   string
	Insert    bool
	Owner     string
	IsOwner   bool // the current role has the owner's privileges
	Tables    []string
	// ViaRoot is publish_via_partition_root: a partitioned table's changes are published
	// under the root's name (and pg_publication_tables lists the root), not the partition's.
	ViaRoot bool
	// Members are the tables named in the publication (FOR TABLE, ADD TABLE), "schema.table":
	// without ViaRoot a partitioned member is not in Tables (its partitions are), yet it is
	// already a member, and adding it again fails with 42710.
	Members []string
	// Partitioned are the partitioned tables among Members, "schema.table", sorted. (A
	// partition named on its own is published under its own name whatever the setting; the
	// partitioned tables of a FOR ALL TABLES or FOR TABLES IN SCHEMA publication are not
	// named, and not judged.)
	Partitioned []string
}

// lookupPublication reads the publication; found is false when it does not exist.
func (s *Store) lookupPublication(ctx context.Context, pub string) (row pubRow, found bool, err error) {
	var ins, upd, del, trunc bool
	err = s.conn.QueryRow(ctx, `
SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate,
       pg_get_userbyid(pubowner)::text, pg_has_role(pubowner, 'USAGE'), pubviaroot
FROM pg_publication WHERE pubname = $1`, pub).Scan(
		&row.AllTables, &ins, &upd, &del, &trunc, &row.Owner, &row.IsOwner, &row.ViaRoot)
	if errors.Is(err, pgx.ErrNoRows) {
		return pubRow{}, false, nil
	}
	if err != nil {
		return pubRow{}, false, fmt.Errorf("publication %q: read pg_publication: %w", pub, err)
	}
	var ops []string
	for _, op := range []struct {
		on   bool
		name string
	}{{ins, "insert"}, {upd, "update"}, {del, "delete"}, {trunc, "truncate"}} {
		if op.on {
			ops = append(ops, op.name)
		}
	}
	row.Insert = ins
	row.Publish = strings.Join(ops, ", ")

	rows, err := s.conn.Query(ctx, `
SELECT schemaname::text || '.' || tablename::text FROM pg_publication_tables
WHERE pubname = $1 ORDER BY schemaname, tablename`, pub)
	if err != nil {
		return pubRow{}, false, fmt.Errorf("publication %q: read pg_publication_tables: %w", pub, err)
	}
	row.Tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return pubRow{}, false, fmt.Errorf("publication %q: read pg_publication_tables: %w", pub, err)
	}
	if row.Tables == nil {
		row.Tables = []string{}
	}

	// The named members, and which of them are partitioned.
	if err := s.conn.QueryRow(ctx, `
WITH members AS (
    SELECT n.nspname::text || '.' || c.relname::text AS name, c.relkind
    FROM pg_publication p JOIN pg_publication_rel pr ON pr.prpubid = p.oid
    JOIN pg_class c ON c.oid = pr.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE p.pubname = $1)
SELECT coalesce((SELECT array_agg(name ORDER BY name) FROM members), '{}'),
       coalesce((SELECT array_agg(name ORDER BY name) FROM members WHERE relkind = 'p'), '{}')`, pub).Scan(&row.Members, &row.Partitioned); err != nil {
		return pubRow{}, false, fmt.Errorf("publication %q: read pg_publication_rel: %w", pub, err)
	}
	return row, true, nil
}

// tableRow describes a relation found by schema and name.
type tableRow struct {
	Kind    string // pg_class.relkind
	Owner   string
	IsOwner bool // the current role has the owner's privileges
}

// lookupTable returns ErrNoTable when t does not exist or is not a table.
func (s *Store) lookupTable(ctx context.Context, t outbox.Table) (tableRow, error) {
	var row tableRow
	err := s.conn.QueryRow(ctx, `
SELECT c.relkind::text, pg_get_userbyid(c.relowner)::text, pg_has_role(c.relowner, 'USAGE')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2`, t.Schema, t.Name).Scan(&row.Kind, &row.Owner, &row.IsOwner)
	if errors.Is(err, pgx.ErrNoRows) {
		return tableRow{}, fmt.Errorf("table %q: %w: create it first (names are case-sensitive; "+
			"give \"schema.table\" for a schema other than public)", t.String(), ErrNoTable)
	}
	if err != nil {
		return tableRow{}, fmt.Errorf("table %q: read pg_class: %w", t.String(), err)
	}
	if row.Kind != "r" && row.Kind != "p" {
		return tableRow{}, fmt.Errorf("table %q: %w: the relation exists but is not a table (relkind %q), "+
			"and only tables can be published", t.String(), ErrNoTable, row.Kind)
	}
	return row, nil
}

// scanLSN parses a nullable pg_lsn read as text; NULL is 0.
func scanLSN(text *string) (pglogrepl.LSN, error) {
	if text == nil {
		return 0, nil
	}
	lsn, err := pglogrepl.ParseLSN(*text)
	if err != nil {
		return 0, fmt.Errorf("parse LSN %q: %w", *text, err)
	}
	return lsn, nil
}
