package prune

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/pgcatalog"
	"github.com/cdc-relay/cdc-relay/outbox"
)

// PartitionAction says how Run removes a partitioned outbox's published rows: whole
// partitions at a time instead of DELETE.
type PartitionAction string

// The partition actions.
const (
	PartitionsDrop   PartitionAction = "drop"   // DROP TABLE the partition
	PartitionsDetach PartitionAction = "detach" // ALTER TABLE ... DETACH PARTITION: it stays, as a table of its own
)

// ErrNotPartitioned means Options.Partitions was set for a table that is not partitioned.
var ErrNotPartitioned = errors.New("table is not partitioned")

// runPartitions drops or detaches each partition of t (the default partition never) that holds
// rows and only rows created before the cutoff and published (the predicate published, with $1
// the cutoff and $2 the mark's xid in ModeRun). A partition is judged again under an ACCESS
// EXCLUSIVE lock of the table and the partition, taken in the order writers take theirs, so no
// row is written into it between the judgement and the drop: writers to the outbox wait for
// that moment (the partition's scan).
func runPartitions(ctx context.Context, conn *pgx.Conn, o Options, t outbox.Table, published string, args []any, res *Result) error {
	var kind string
	err := conn.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)`, t.Sanitize()).Scan(&kind)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && kind == "") {
		return fmt.Errorf("prune: table %s does not exist", t)
	}
	if err != nil {
		return fmt.Errorf("prune: read the kind of %s: %w", t, err)
	}
	if kind != "p" {
		return fmt.Errorf("prune: %s: %w, so it has no partitions to %s: prune its rows without Options.Partitions",
			t, ErrNotPartitioned, o.Partitions)
	}
	parts, err := pgcatalog.Partitions(ctx, conn, t)
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	created := pgx.Identifier{o.Columns.CreatedAt}.Sanitize()
	for _, p := range parts {
		pt := outbox.Table{Schema: p.Schema, Name: p.Name}
		if p.Bound == "DEFAULT" {
			// Rows of every range not yet made a partition: never whole.
			res.PartitionsKept = append(res.PartitionsKept, pt.String())
			continue
		}
		// Some row, and none that is new or unpublished (a NULL creation time counts as new).
		judge := `SELECT EXISTS (SELECT 1 FROM ` + pt.Sanitize() + `)
			AND NOT EXISTS (SELECT 1 FROM ` + pt.Sanitize() + ` WHERE (` + created + ` < $1 AND ` + published + `) IS NOT TRUE)`
		var whole bool
		if err := conn.QueryRow(ctx, judge, args...).Scan(&whole); err != nil {
			return fmt.Errorf("prune: read partition %s: %w", pt, err)
		}
		if !whole {
			res.PartitionsKept = append(res.PartitionsKept, pt.String())
			continue
		}
		done, err := removePartition(ctx, conn, o.Partitions, t, pt, judge, args)
		if err != nil {
			return err
		}
		if !done {
			res.PartitionsKept = append(res.PartitionsKept, pt.String())
			continue
		}
		res.Partitions = append(res.Partitions, pt.String())
		if o.Progress != nil {
			o.Progress(int64(len(res.Partitions)))
		}
	}
	return nil
}

// removePartition judges partition p of t again under lock and, if it is still whole,
// drops or detaches it; done says whether it did.
func removePartition(ctx context.Context, conn *pgx.Conn, action PartitionAction, t, p outbox.Table, judge string, args []any) (done bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("prune: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit a no-op
	// The table first, as a writer locks it before the partition its row goes to.
	if _, err := tx.Exec(ctx, `LOCK TABLE ONLY `+t.Sanitize()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		return false, fmt.Errorf("prune: lock %s: %w", t, err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE `+p.Sanitize()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		return false, fmt.Errorf("prune: lock partition %s: %w", p, err)
	}
	var whole bool
	if err := tx.QueryRow(ctx, judge, args...).Scan(&whole); err != nil {
		return false, fmt.Errorf("prune: read partition %s: %w", p, err)
	}
	if !whole {
		return false, nil
	}
	sql := `DROP TABLE ` + p.Sanitize()
	if action == PartitionsDetach {
		sql = `ALTER TABLE ` + t.Sanitize() + ` DETACH PARTITION ` + p.Sanitize()
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return false, fmt.Errorf("prune: %s: %w", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("prune: %s: commit: %w", sql, err)
	}
	return true, nil
}

// partitionArgs are the judgement's arguments: $1 the cutoff and, in ModeRun, $2 the mark's
// xid (its low 32 bits, as xmin shows it).
func partitionArgs(o Options, res *Result) []any {
	args := []any{res.Cutoff}
	if o.Mode == ModeRun {
		args = append(args, strconv.FormatUint(res.MarkXmin&0xFFFFFFFF, 10))
	}
	return args
}
