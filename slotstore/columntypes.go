package slotstore

import (
	"context"
	"fmt"
)

// ColumnType returns, for each of tables ("schema.table") that has a column named column, that
// column's type as format_type writes it ("bytea", "character varying(200)"). Tables without
// the column, or that do not exist, are absent from the map.
func (s *Store) ColumnType(ctx context.Context, tables []string, column string) (map[string]string, error) {
	rows, err := s.conn.Query(ctx, `
SELECT n.nspname || '.' || c.relname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname || '.' || c.relname = ANY($1) AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY 1`, tables, column)
	if err != nil {
		return nil, fmt.Errorf("read the type of column %q of %v: %w", column, tables, err)
	}
	defer rows.Close()
	types := map[string]string{}
	for rows.Next() {
		var table, typ string
		if err := rows.Scan(&table, &typ); err != nil {
			return nil, fmt.Errorf("read the type of column %q of %v: %w", column, tables, err)
		}
		types[table] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the type of column %q of %v: %w", column, tables, err)
	}
	return types, nil
}
