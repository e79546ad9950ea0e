package slotstore

import (
	"context"
	"fmt"
)

// Columns returns the column names of each of tables ("schema.table", as Status lists a
// publication's tables) in column order. A table that does not exist is absent from the map.
func (s *Store) Columns(ctx context.Context, tables []string) (map[string][]string, error) {
	rows, err := s.conn.Query(ctx, `
SELECT n.nspname || '.' || c.relname, a.attname::text
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname || '.' || c.relname = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY 1, a.attnum`, tables)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %v: %w", tables, err)
	}
	defer rows.Close()
	cols := map[string][]string{}
	for rows.Next() {
		var table, col string
		if err := rows.Scan(&table, &col); err != nil {
			return nil, fmt.Errorf("read the columns of %v: %w", tables, err)
		}
		cols[table] = append(cols[table], col)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the columns of %v: %w", tables, err)
	}
	return cols, nil
}
