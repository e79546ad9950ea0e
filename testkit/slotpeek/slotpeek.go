// Package slotpeek reads what a logical replication slot holds for a publication without
// consuming it (pg_logical_slot_peek_binary_changes, pgoutput proto_version 1), for the tests
// that check which rows a shard's slot decodes (slotstore's and poller's). It is test support
// only: nothing in the relay imports it.
//
// # Contexts and goroutines
//
// Inserts runs one query with the ctx it is given; no goroutines.
package slotpeek

import (
	"context"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Inserts returns the Insert messages slot holds for publication pub, in WAL order, and fails
// the test if they cannot be read.
func Inserts(ctx context.Context, t testing.TB, conn *pgx.Conn, slot, pub string) []*pglogrepl.InsertMessage {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
		'proto_version', '1', 'publication_names', $2)`, slot, pub)
	if err != nil {
		t.Fatalf("peek %s: %v", slot, err)
	}
	msgs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatalf("peek %s: %v", slot, err)
	}
	var out []*pglogrepl.InsertMessage
	for _, b := range msgs {
		m, err := pglogrepl.Parse(b)
		if err != nil {
			t.Fatalf("peek %s: decode: %v", slot, err)
		}
		if ins, ok := m.(*pglogrepl.InsertMessage); ok {
			out = append(out, ins)
		}
	}
	return out
}
