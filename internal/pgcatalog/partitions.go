// Package pgcatalog reads what PostgreSQL's catalog says about an outbox table's partitions,
// once for the two packages that work on them: poller (the pending-rows index of each
// partition) and prune (whole partitions dropped or detached).
//
// # Contexts and goroutines
//
// Partitions takes ctx first and runs its one query with it; no goroutines.
package pgcatalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Querier runs a query: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Table is the table whose partitions are listed, as outbox.Table gives it: its quoted,
// qualified name (Sanitize, what to_regclass reads) and its name for errors (String).
type Table interface {
	Sanitize() string
	String() string
}

// Partition is a partition of a partitioned table.
type Partition struct {
	Schema, Name string
	Partitioned  bool   // itself partitioned: its rows are in its own partitions
	Bound        string // pg_get_expr(relpartbound): "FOR VALUES FROM (1) TO (1001)", or "DEFAULT"
}

// Partitions lists t's partitions (its own, not theirs) by schema and name; none when t is not
// partitioned.
func Partitions(ctx context.Context, q Querier, t Table) ([]Partition, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname::text, c.relname::text, c.relkind = 'p', coalesce(pg_get_expr(c.relpartbound, c.oid), '')
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE i.inhparent = to_regclass($1) ORDER BY 1, 2`, t.Sanitize())
	if err != nil {
		return nil, fmt.Errorf("read the partitions of %s: %w", t, err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		var p Partition
		err := r.Scan(&p.Schema, &p.Name, &p.Partitioned, &p.Bound)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the partitions of %s: %w", t, err)
	}
	return parts, nil
}
