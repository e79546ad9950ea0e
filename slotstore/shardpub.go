package slotstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/outbox"
)

// The shards' sentinels (slot create --shards, run --shard).
var (
	// ErrRowFilterUnsupported means the server is older than PostgreSQL 15, which brought
	// publication row filters: a shard's publication cannot be made there.
	ErrRowFilterUnsupported = errors.New("publication row filters need PostgreSQL 15 or later")
	// ErrShardFilter means a shard's publication exists without the shard's row filter on
	// every table (it would publish other shards' rows too), or a table lacks the key column
	// the filter reads.
	ErrShardFilter = errors.New("publication is not the shard's")
)

// rowFilterVersion is the first major version with publication row filters.
const rowFilterVersion = 15

func rowFilterUnsupported(pub string, version int) error {
	return fmt.Errorf("publication %q: %w: this server is PostgreSQL %d; shards split the outbox with a row filter in each "+
		"shard's publication, so upgrade to 15+ or run one relay without --shards", pub, ErrRowFilterUnsupported, version)
}

// checkShard checks, for Create with o.Shard set, that every table has the key column and
// that an existing publication carries the shard's row filter on each table it has, and
// returns the filter to publish the missing tables with.
func (s *Store) checkShard(ctx context.Context, o CreateOptions, tables []outbox.Table, plan pubPlan) (string, error) {
	key := cmp.Or(o.KeyColumn, "aggregate_id")
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	cols, err := s.Columns(ctx, names)
	if err != nil {
		return "", err
	}
	for _, t := range names {
		if !slices.Contains(cols[t], key) {
			return "", fmt.Errorf("publication %q: %w: table %s has no column %q to hash into shards; give the key column "+
				"the relay reads (--column-aggregate-id, or --profile)", o.Publication, ErrShardFilter, t, key)
		}
	}
	if plan.Exists {
		if err := s.CheckShardPublication(ctx, o.Publication, *o.Shard, key); err != nil {
			return "", err
		}
	}
	return o.Shard.RowFilter(key), nil
}

// CheckShardPublication checks that publication pub is shard sh's: on PostgreSQL 15+, every
// table it publishes carries a row filter that hashes into sh's Count shards and keeps sh's
// Index on keyColumn (the server's text of Shard.RowFilter(keyColumn)). A publication of all tables, or a table
// without the filter, is ErrShardFilter: its slot would carry other shards' rows, which
// their relays publish too. A missing publication is not checked here.
func (s *Store) CheckShardPublication(ctx context.Context, pub string, sh Shard, keyColumn string) error {
	version, err := ServerVersion(ctx, s.conn)
	if err != nil {
		return err
	}
	if version < rowFilterVersion {
		return rowFilterUnsupported(pub, version)
	}
	var all bool
	err = s.conn.QueryRow(ctx, `SELECT puballtables FROM pg_publication WHERE pubname = $1`, pub).Scan(&all)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("publication %q: read pg_publication: %w", pub, err)
	}
	fix := fmt.Sprintf("drop it (cdc-relay slot drop --shards %d, or DROP PUBLICATION %s) and run slot create --shards %d again",
		sh.Count, pgx.Identifier{pub}.Sanitize(), sh.Count)
	if all {
		return fmt.Errorf("publication %q: %w: it publishes all tables, which cannot carry shard %s's row filter; %s", pub, ErrShardFilter, sh, fix)
	}
	rows, err := s.conn.Query(ctx, `
SELECT schemaname::text || '.' || tablename::text, coalesce(rowfilter, '') FROM pg_publication_tables
WHERE pubname = $1 ORDER BY 1`, pub)
	if err != nil {
		return fmt.Errorf("publication %q: read pg_publication_tables: %w", pub, err)
	}
	type tableFilter struct{ Table, Filter string }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[tableFilter])
	if err != nil {
		return fmt.Errorf("publication %q: read pg_publication_tables: %w", pub, err)
	}
	// The server's text of the filter quotes the column only where it must, drops the cast of
	// a text key and re-parenthesises: (((hashtext(aggregate_id) & 2147483647) % 4) = 1), or
	// hashtext((aggregate_id)::text) for a key of another type.
	var ident string
	if err := s.conn.QueryRow(ctx, `SELECT quote_ident($1)`, keyColumn).Scan(&ident); err != nil {
		return fmt.Errorf("publication %q: quote the key column %q: %w", pub, keyColumn, err)
	}
	want := func(arg string) string {
		return fmt.Sprintf("(((hashtext(%s) & 2147483647) %% %d) = %d)", arg, sh.Count, sh.Index)
	}
	for _, g := range got {
		if g.Filter != want(ident) && g.Filter != want("("+ident+")::text") {
			what := "no row filter"
			if g.Filter != "" {
				what = "the row filter " + g.Filter
			}
			return fmt.Errorf("publication %q: %w: it publishes %s with %s, not shard %s's on key column %q (%s); %s",
				pub, ErrShardFilter, g.Table, what, sh, keyColumn, sh.RowFilter(keyColumn), fix)
		}
	}
	return nil
}

// ShardSlots lists the shard slots of base (base_s<I>of<N>, any N) in this cluster, by
// count, then index.
func (s *Store) ShardSlots(ctx context.Context, base string) ([]Shard, error) {
	rows, err := s.conn.Query(ctx, `SELECT slot_name::text FROM pg_replication_slots WHERE starts_with(slot_name::text, $1)`, base+"_s")
	if err != nil {
		return nil, fmt.Errorf("list the shard slots of %q: read pg_replication_slots: %w", base, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list the shard slots of %q: read pg_replication_slots: %w", base, err)
	}
	var out []Shard
	for _, n := range names {
		if sh, ok := ShardOf(n, base); ok {
			out = append(out, sh)
		}
	}
	slices.SortFunc(out, func(a, b Shard) int { return cmp.Or(cmp.Compare(a.Count, b.Count), cmp.Compare(a.Index, b.Index)) })
	return out, nil
}

// DropPublication drops publication pub if it exists (slot drop --shards, for a shard whose
// slot is gone already).
func (s *Store) DropPublication(ctx context.Context, pub string) error {
	if err := ValidateName("publication", pub); err != nil {
		return err
	}
	if _, err := s.conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{pub}.Sanitize()); err != nil {
		ss, serr := s.session(ctx)
		if serr != nil {
			return fmt.Errorf("publication %q: drop publication: %w", pub, err)
		}
		return ddlError("publication", pub, "drop publication", ss.Role, err)
	}
	return nil
}
