package slotstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/slotstore"
	"github.com/cdc-relay/cdc-relay/testkit/slotpeek"
)

// createShards makes the test's table's n shards with Create and drops them at cleanup.
func (e *env) createShards(t *testing.T, store *slotstore.Store, n int) []slotstore.CreateResult {
	t.Helper()
	t.Cleanup(func() { e.dropShards(t, n) })
	var out []slotstore.CreateResult
	for _, sh := range slotstore.AllShards(n) {
		res, err := store.Create(testCtx(t), slotstore.CreateOptions{Slot: sh.Slot(e.Slot), Publication: sh.Publication(e.Pub),
			Tables: []string{e.Table}, Shard: &sh, KeyColumn: "aggregate_id"})
		if err != nil {
			t.Fatalf("Create shard %s: %v", sh, err)
		}
		out = append(out, res)
	}
	return out
}

func (e *env) dropShards(t *testing.T, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, sh := range slotstore.AllShards(n) {
		if err := dropSlot(ctx, e.admin, sh.Slot(e.Slot)); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if _, err := e.admin.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{sh.Publication(e.Pub)}.Sanitize()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// peekInserts decodes what slot holds for publication pub (without consuming it): the id and
// key (columns 1 and 2 of the test's table) of each insert.
func (e *env) peekInserts(t *testing.T, slot, pub string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ins := range slotpeek.Inserts(testCtx(t), t, e.admin, slot, pub) {
		cols := ins.Tuple.Columns
		out[string(cols[0].Data)] = string(cols[1].Data)
	}
	return out
}

// slot create --shards 3 on PostgreSQL 15+: each row inserted afterwards is decoded by exactly
// one shard's slot, the one whose index the server's hash of its key gives, so the union of
// the shards is every row and a key never appears in two of them.
func TestCreateShardsPutsEveryRowInExactlyOneSlot(t *testing.T) {
	t.Parallel()
	e, ctx, store := withTable(t)
	for _, res := range e.createShards(t, store, 3) {
		if !res.SlotCreated || !res.PublicationCreated {
			t.Fatalf("first Create: %+v, want the slot and publication created", res)
		}
	}
	// Again: nothing to do, and the filters it finds are the shards'.
	for _, res := range e.createShards(t, store, 3) {
		if res.SlotCreated || res.PublicationCreated || res.TablesAdded != nil {
			t.Fatalf("second Create: %+v, want a no-op", res)
		}
	}
	listed, err := store.ShardSlots(ctx, e.Slot)
	if err != nil || !slices.Equal(listed, slotstore.AllShards(3)) {
		t.Fatalf("ShardSlots = %v, %v; want 0/3 1/3 2/3", listed, err)
	}
	// 1,000 rows over 400 keys of several shapes.
	e.exec(t, `INSERT INTO `+pgx.Identifier{"public", e.Table}.Sanitize()+` (aggregate_id, topic, payload)
		SELECT CASE g % 4 WHEN 0 THEN 'order-' || (g % 400) WHEN 1 THEN md5((g % 400)::text) WHEN 2 THEN 'Ünïcode ' || (g % 400) ELSE (g % 400)::text END,
		       't', '{}' FROM generate_series(1, 1000) g`)
	owner := map[string]int{}    // id -> shard
	keyShard := map[string]int{} // key -> shard
	for _, sh := range slotstore.AllShards(3) {
		got := e.peekInserts(t, sh.Slot(e.Slot), sh.Publication(e.Pub))
		if len(got) == 0 {
			t.Errorf("shard %s decoded no row", sh)
		}
		for id, key := range got {
			if prev, dup := owner[id]; dup {
				t.Fatalf("row %s is in shard %d/3 and shard %s", id, prev, sh)
			}
			owner[id] = sh.Index
			if prev, ok := keyShard[key]; ok && prev != sh.Index {
				t.Fatalf("key %q is in shard %d/3 and shard %s", key, prev, sh)
			}
			keyShard[key] = sh.Index
		}
	}
	if len(owner) != 1000 {
		t.Fatalf("the shards decoded %d distinct rows, want all 1000", len(owner))
	}
	// The shard is the one the server's expression names for the key.
	rows, err := e.admin.Query(ctx, `SELECT id::text, (hashtext(aggregate_id) & 2147483647) % 3 FROM `+pgx.Identifier{"public", e.Table}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	type idShard struct {
		ID    string
		Shard int
	}
	want, err := pgx.CollectRows(rows, pgx.RowToStructByPos[idShard])
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if owner[w.ID] != w.Shard {
			t.Fatalf("row %s is in shard %d/3, the hash says %d", w.ID, owner[w.ID], w.Shard)
		}
	}
}

// An existing publication of a shard's name without the shard's row filter (made by hand, or
// for another key column) is refused: its slot would carry every shard's rows.
func TestCreateShardRefusesAPublicationThatIsNotTheShards(t *testing.T) {
	t.Parallel()
	e, ctx, store := withTable(t)
	sh := slotstore.Shard{Index: 0, Count: 2}
	t.Cleanup(func() { e.dropShards(t, 2) })
	e.exec(t, `CREATE PUBLICATION `+pgx.Identifier{sh.Publication(e.Pub)}.Sanitize()+` FOR TABLE `+pgx.Identifier{"public", e.Table}.Sanitize())
	_, err := store.Create(ctx, slotstore.CreateOptions{Slot: sh.Slot(e.Slot), Publication: sh.Publication(e.Pub), Tables: []string{e.Table}, Shard: &sh})
	if !errors.Is(err, slotstore.ErrShardFilter) || !strings.Contains(err.Error(), "no row filter") || !strings.Contains(err.Error(), "slot drop --shards 2") {
		t.Fatalf("Create over an unfiltered publication: %v; want ErrShardFilter saying so and how to fix it", err)
	}
	if e.slotExists(t, sh.Slot(e.Slot)) {
		t.Errorf("the slot was created although the publication is refused")
	}
	// The right filter on another column is not the shard's either.
	e.exec(t, `DROP PUBLICATION `+pgx.Identifier{sh.Publication(e.Pub)}.Sanitize())
	e.exec(t, `CREATE PUBLICATION `+pgx.Identifier{sh.Publication(e.Pub)}.Sanitize()+` FOR TABLE `+pgx.Identifier{"public", e.Table}.Sanitize()+
		` WHERE (`+sh.RowFilter("topic")+`) WITH (publish = 'insert')`)
	if err := store.CheckShardPublication(ctx, sh.Publication(e.Pub), sh, "aggregate_id"); !errors.Is(err, slotstore.ErrShardFilter) {
		t.Fatalf("a filter on topic checked as aggregate_id's: %v; want ErrShardFilter", err)
	}
	if err := store.CheckShardPublication(ctx, sh.Publication(e.Pub), sh, "topic"); err != nil {
		t.Fatalf("the filter on topic checked as topic's: %v", err)
	}
	if err := store.CheckShardPublication(ctx, sh.Publication(e.Pub), slotstore.Shard{Index: 1, Count: 2}, "topic"); !errors.Is(err, slotstore.ErrShardFilter) {
		t.Fatalf("shard 0/2's filter checked as 1/2's: %v; want ErrShardFilter", err)
	}
	// A key column the table lacks: refused before anything is made.
	other := slotstore.Shard{Index: 1, Count: 2}
	_, err = store.Create(ctx, slotstore.CreateOptions{Slot: other.Slot(e.Slot), Publication: other.Publication(e.Pub), Tables: []string{e.Table}, Shard: &other, KeyColumn: "nope"})
	if !errors.Is(err, slotstore.ErrShardFilter) || !strings.Contains(err.Error(), `no column "nope"`) || e.pubExists(t, other.Publication(e.Pub)) {
		t.Fatalf("Create with a missing key column: %v; want ErrShardFilter and nothing made", err)
	}
}

// Shard slots of every count are listed; other slots that share the prefix are not.
func TestShardSlotsListsEveryCount(t *testing.T) {
	t.Parallel()
	e, ctx, store := withTable(t)
	e.createShards(t, store, 2)
	one := slotstore.Shard{Index: 0, Count: 1}
	t.Cleanup(func() { e.dropShards(t, 1) })
	if _, err := store.Create(ctx, slotstore.CreateOptions{Slot: one.Slot(e.Slot), Publication: one.Publication(e.Pub), Tables: []string{e.Table}, Shard: &one}); err != nil {
		t.Fatal(err)
	}
	got, err := store.ShardSlots(ctx, e.Slot)
	want := []slotstore.Shard{{Index: 0, Count: 1}, {Index: 0, Count: 2}, {Index: 1, Count: 2}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ShardSlots = %v, %v; want %v", got, err, want)
	}
}
