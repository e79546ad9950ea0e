package poller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/pgcatalog"
	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// querier is what the table inspection needs: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queries are the statements of a cycle, built for the table's columns as they are now.
type queries struct {
	sel string // $1 = batch size
	upd string // $1 = ids as text[]; marks only the pending ones
	// hasIndex reports whether a valid partial index on the pending rows exists.
	hasIndex bool
	// binary: the payload column is bytea, selected as its bytes.
	binary bool
}

// columnsOf returns the table's live columns and their types (format_type).
func columnsOf(ctx context.Context, q querier, t outbox.Table) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod)
		FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, t.Sanitize())
	if err != nil {
		return nil, fmt.Errorf("poller: read the columns of %s: %w", t, err)
	}
	cols := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			rows.Close()
			return nil, fmt.Errorf("poller: read the columns of %s: %w", t, err)
		}
		cols[name] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("poller: read the columns of %s: %w", t, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: %s (check --table and that the user may read it)", ErrNoTable, t)
	}
	return cols, nil
}

// buildQueries reads the table's columns and writes the cycle's statements. Optional
// columns the table lacks (event type, headers) are read as NULL; a missing required column
// is ErrMissingColumn.
func buildQueries(ctx context.Context, q querier, t outbox.Table, c outbox.Columns, fixedTopic string, shard *slotstore.Shard) (*queries, error) {
	cols, err := columnsOf(ctx, q, t)
	if err != nil {
		return nil, err
	}
	required := []struct{ col, flag string }{
		{c.ID, "--column-id"}, {c.AggregateID, "--column-aggregate-id"}, {c.Payload, "--column-payload"},
		{c.CreatedAt, "--column-created-at"}, {c.PublishedAt, "--column-published-at"},
	}
	if fixedTopic == "" {
		required = append(required, struct{ col, flag string }{c.Topic, "--column-topic (or set --topic)"})
	}
	var missing []error
	for _, r := range required {
		if _, ok := cols[r.col]; !ok {
			missing = append(missing, fmt.Errorf("%w: %s has no column %q (map it with %s)", ErrMissingColumn, t, r.col, r.flag))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	ok, binary := outbox.PayloadTypeName(cols[c.Payload])
	if !ok {
		return nil, fmt.Errorf("%w: %w", ErrPayloadType, outbox.PayloadTypeError("column-payload", c.Payload, t.String(), cols[c.Payload]))
	}
	col := func(name string) string { return "o." + pgx.Identifier{name}.Sanitize() }
	text := func(name string, use bool) string {
		if _, ok := cols[name]; !ok || !use {
			return "NULL::text"
		}
		return col(name) + "::text"
	}
	tbl, id, pub := t.Sanitize(), col(c.ID), pgx.Identifier{c.PublishedAt}.Sanitize()
	payload := text(c.Payload, true)
	if binary {
		payload = col(c.Payload) // read as bytea: its bytes, not its hex text
	}
	// A shard's rows: the server's expression of the shard's publication, on the key column.
	shardCond := ""
	if shard != nil {
		shardCond = "(" + shard.RowFilter(c.AggregateID) + ") AND "
	}
	// Output columns have their own names so that ORDER BY reaches the table's id column
	// (and its index), never the text output column.
	sel := fmt.Sprintf(`SELECT %s AS p_id, %s AS p_key, %s AS p_topic, %s AS p_payload, %s AS p_event_type, %s AS p_headers, %s::timestamptz AS p_created_at
  FROM %s o
 WHERE %so.%s IS NULL
 ORDER BY %s
 LIMIT $1
 FOR UPDATE`+skipLocked,
		text(c.ID, true), text(c.AggregateID, true), text(c.Topic, fixedTopic == ""), payload,
		text(c.EventType, true), text(c.Headers, true), col(c.CreatedAt), tbl, shardCond, pub, id)
	// A row marked already keeps its time: marking the rows of a checkpoint again is a no-op.
	upd := fmt.Sprintf(`UPDATE %s SET %s = now() WHERE %s = ANY($1::text[]::%s[]) AND %s IS NULL`,
		tbl, pub, pgx.Identifier{c.ID}.Sanitize(), cols[c.ID], pub)
	has, err := hasPendingIndex(ctx, q, t, c)
	if err != nil {
		return nil, err
	}
	return &queries{sel: sel, upd: upd, hasIndex: has, binary: binary}, nil
}

// skipLocked ends the cycle's SELECT: at least once, several pollers may share a table, each
// cycle taking rows no other holds.
const skipLocked = " SKIP LOCKED"

// hasPendingIndex reports whether a valid partial index with the predicate
// "published_at IS NULL" exists on the table.
func hasPendingIndex(ctx context.Context, q querier, t outbox.Table, c outbox.Columns) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM pg_index i
		WHERE i.indrelid = to_regclass($1) AND i.indisvalid AND i.indpred IS NOT NULL
		  AND pg_get_expr(i.indpred, i.indrelid) = '(' || quote_ident($2) || ' IS NULL)'`,
		t.Sanitize(), c.PublishedAt).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("poller: look for the pending-rows index on %s: %w", t, err)
	}
	return n > 0, nil
}

// IndexName is the name CreateIndex gives the pending-rows index of a table:
// "<table>_pending_idx", shortened to PostgreSQL's 63 bytes.
func IndexName(tableName string) string {
	t, err := outbox.ParseTable(tableName)
	if err != nil {
		return ""
	}
	const suffix = "_pending_idx"
	n := t.Name
	if len(n)+len(suffix) > 63 {
		n = n[:63-len(suffix)]
	}
	return n + suffix
}

// CreateIndex creates the partial index the cycle's SELECT uses, unless it exists:
//
//	CREATE INDEX CONCURRENTLY IF NOT EXISTS <table>_pending_idx ON <table> (id) WHERE published_at IS NULL
//
// CONCURRENTLY lets writers go on while it builds; conn must not be inside a transaction. On
// a partitioned table (where PostgreSQL builds no index concurrently) it makes the table's index
// ON ONLY the table and builds each partition's concurrently, attached to it. It
// reports whether it created the index. An index of that name left invalid by a failed
// concurrent build is ErrInvalidIndex.
func CreateIndex(ctx context.Context, conn *pgx.Conn, tableName string, c outbox.Columns) (name string, created bool, err error) {
	t, err := outbox.ParseTable(tableName)
	if err != nil {
		return "", false, err
	}
	c = c.WithDefaults()
	cols, err := columnsOf(ctx, conn, t)
	if err != nil {
		return "", false, err
	}
	for _, col := range []string{c.ID, c.PublishedAt} {
		if _, ok := cols[col]; !ok {
			return "", false, fmt.Errorf("%w: %s has no column %q", ErrMissingColumn, t, col)
		}
	}
	name = IndexName(tableName)
	valid, exists, err := indexState(ctx, conn, t, name)
	if err != nil {
		return name, false, err
	}
	partitioned, err := isPartitioned(ctx, conn, t)
	if err != nil {
		return name, false, err
	}
	if partitioned && (!exists || !valid) {
		// PostgreSQL builds no index concurrently on a partitioned table: each partition's is
		// built concurrently and attached to the table's, which is valid once every partition's is.
		if err := createPartitionedIndex(ctx, conn, t, name, c); err != nil {
			return name, false, err
		}
		created = !exists
		if valid, exists, err = indexState(ctx, conn, t, name); err != nil {
			return name, false, err
		}
	} else if !exists {
		if err := createIndexConcurrently(ctx, conn, t, name, c); err != nil {
			return name, false, err
		}
		if valid, exists, err = indexState(ctx, conn, t, name); err != nil {
			return name, false, err
		}
		created = true
	}
	if !exists || !valid {
		return name, false, fmt.Errorf("%w: %s on %s (DROP INDEX CONCURRENTLY %s; then create it again)", ErrInvalidIndex, name, t, name)
	}
	return name, created, nil
}

func createIndexConcurrently(ctx context.Context, conn *pgx.Conn, t outbox.Table, name string, c outbox.Columns) error {
	sql := fmt.Sprintf(`CREATE INDEX CONCURRENTLY IF NOT EXISTS %s ON %s (%s) WHERE %s IS NULL`,
		pgx.Identifier{name}.Sanitize(), t.Sanitize(), pgx.Identifier{c.ID}.Sanitize(), pgx.Identifier{c.PublishedAt}.Sanitize())
	if _, err := conn.Exec(ctx, sql); err != nil && !concurrentCreate(err) {
		return fmt.Errorf("poller: create index %s on %s: %w", name, t, err)
	}
	return nil
}

// createPartitionedIndex makes the pending-rows index of partitioned table t: the table's own
// (ON ONLY: invalid, and no lock held while the partitions' are built), then each partition's,
// concurrently (a partitioned partition's the same way), attached to it. A partition created
// later gets its index from the table's. Running it again finishes what an interrupted run left.
func createPartitionedIndex(ctx context.Context, conn *pgx.Conn, t outbox.Table, name string, c outbox.Columns) error {
	sql := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON ONLY %s (%s) WHERE %s IS NULL`,
		pgx.Identifier{name}.Sanitize(), t.Sanitize(), pgx.Identifier{c.ID}.Sanitize(), pgx.Identifier{c.PublishedAt}.Sanitize())
	if _, err := conn.Exec(ctx, sql); err != nil && !concurrentCreate(err) {
		return fmt.Errorf("poller: create index %s on %s: %w", name, t, err)
	}
	parts, err := pgcatalog.Partitions(ctx, conn, t)
	if err != nil {
		return fmt.Errorf("poller: %w", err)
	}
	for _, p := range parts {
		pt := outbox.Table{Schema: p.Schema, Name: p.Name}
		// The partition may have an index of that definition already (made by the table's
		// when it was created as a partition): attach whichever exists.
		pname, err := partitionIndex(ctx, conn, pt, name, c)
		if err != nil {
			return err
		}
		if pname == "" && p.Partitioned {
			pname = IndexName(pt.String())
			err = createPartitionedIndex(ctx, conn, pt, pname, c)
		} else if pname == "" {
			// Unnamed: PostgreSQL picks a name no other index has. Partitions' names share
			// the table's prefix, so IndexName's shortening could give two of them one name.
			sql := fmt.Sprintf(`CREATE INDEX CONCURRENTLY ON %s (%s) WHERE %s IS NULL`,
				pt.Sanitize(), pgx.Identifier{c.ID}.Sanitize(), pgx.Identifier{c.PublishedAt}.Sanitize())
			if _, err = conn.Exec(ctx, sql); err != nil {
				return fmt.Errorf("poller: create the pending-rows index of partition %s: %w", pt, err)
			}
			if pname, err = partitionIndex(ctx, conn, pt, name, c); err == nil && pname == "" {
				err = fmt.Errorf("%w: the index built on partition %s (DROP INDEX CONCURRENTLY the invalid one; then create it again)", ErrInvalidIndex, pt)
			}
		}
		if err != nil {
			return err
		}
		attach := fmt.Sprintf(`ALTER INDEX %s ATTACH PARTITION %s`,
			pgx.Identifier{t.Schema, name}.Sanitize(), pgx.Identifier{pt.Schema, pname}.Sanitize())
		if _, err := conn.Exec(ctx, attach); err != nil {
			return fmt.Errorf("poller: attach index %s of partition %s to %s: %w", pname, pt, name, err)
		}
	}
	return nil
}

// partitionIndex returns the index of partition p attached to the table's index parentIndex,
// or else a valid unattached pending-rows index of p (on the id column alone, with the predicate
// "published_at IS NULL"), or "" when neither exists.
func partitionIndex(ctx context.Context, conn *pgx.Conn, p outbox.Table, parentIndex string, c outbox.Columns) (string, error) {
	var name string
	err := conn.QueryRow(ctx, `SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		LEFT JOIN pg_inherits h ON h.inhrelid = i.indexrelid
		LEFT JOIN pg_class pc ON pc.oid = h.inhparent
		WHERE i.indrelid = to_regclass($1)
		  AND (pc.relname = $2
		       OR (h.inhrelid IS NULL AND i.indisvalid AND i.indnatts = 1 AND i.indpred IS NOT NULL
		           AND pg_get_expr(i.indpred, i.indrelid) = '(' || quote_ident($3) || ' IS NULL)'
		           AND i.indkey[0] = (SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attname = $4)))
		ORDER BY pc.relname = $2 DESC NULLS LAST, c.relname LIMIT 1`, p.Sanitize(), parentIndex, c.PublishedAt, c.ID).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("poller: look up the pending-rows index of partition %s: %w", p, err)
	}
	return name, nil
}

// isPartitioned reports whether t is a partitioned table.
func isPartitioned(ctx context.Context, q querier, t outbox.Table) (bool, error) {
	var p bool
	if err := q.QueryRow(ctx, `SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass($1)`, t.Sanitize()).Scan(&p); err != nil {
		return false, fmt.Errorf("poller: read the kind of %s: %w", t, err)
	}
	return p, nil
}

// concurrentCreate reports an error from a CREATE INDEX that another session ran at the
// same moment (duplicate name in pg_class).
func concurrentCreate(err error) bool {
	c := slotfacts.Code(err)
	return c == pgerrcode.DuplicateTable || c == pgerrcode.UniqueViolation
}

func indexState(ctx context.Context, q querier, t outbox.Table, name string) (valid, exists bool, err error) {
	err = q.QueryRow(ctx, `SELECT i.indisvalid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_index i ON i.indexrelid = c.oid WHERE n.nspname = $1 AND c.relname = $2`, t.Schema, name).Scan(&valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("poller: look up index %s: %w", name, err)
	}
	return valid, true, nil
}

// schemaChanged reports a server error that means the table or a column changed under the
// prepared statements: rebuild them before the next cycle.
func schemaChanged(err error) bool {
	switch slotfacts.Code(err) {
	case pgerrcode.UndefinedTable, pgerrcode.UndefinedColumn, pgerrcode.FeatureNotSupported, pgerrcode.DatatypeMismatch: // FeatureNotSupported: a cached plan changed
		return true
	}
	return strings.Contains(err.Error(), "cached plan must not change result type")
}
