package poller

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/slotstore"
	"github.com/cdc-relay/cdc-relay/testkit/slotpeek"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Each shard's exactly-once poller has its own transactional id and checkpoint key: with one
// id, starting shard 1's poller would fence shard 0's.
func TestShardPollersHaveTheirOwnTransactionalID(t *testing.T) {
	cfg := func(sh *slotstore.Shard) ExactlyOnce {
		return *Config{Table: "outbox", ExactlyOnce: &ExactlyOnce{}, Shard: sh}.withDefaults().ExactlyOnce
	}
	plain := cfg(nil)
	s1 := cfg(&slotstore.Shard{Index: 1, Count: 4})
	if plain.TransactionalID != "cdc-relay-poll-public.outbox" || s1.TransactionalID != "cdc-relay-poll-public.outbox_s1of4" {
		t.Errorf("transactional ids %q and %q", plain.TransactionalID, s1.TransactionalID)
	}
	if s1.txnConfig().Slot != kafkatxn.PollKey("cdc-relay-poll-public.outbox_s1of4") || s1.txnConfig().Slot == plain.txnConfig().Slot {
		t.Errorf("checkpoint keys %q and %q", s1.txnConfig().Slot, plain.txnConfig().Slot)
	}
	given := *Config{Table: "outbox", ExactlyOnce: &ExactlyOnce{TransactionalID: "mine"}, Shard: &slotstore.Shard{Index: 1, Count: 4}}.withDefaults().ExactlyOnce
	if given.TransactionalID != "mine" {
		t.Errorf("--transactional-id given: %q", given.TransactionalID)
	}
}

// poll --shard I/N selects the rows of the shard's publication: with the slots of slot create
// --shards 3 on the same table, each shard's poller publishes and marks exactly the rows that
// shard's slot decodes (the server computes the same expression for both), and the three
// together publish every row once.
func TestShardPollersSplitTheRowsAsTheShardsSlotsDo(t *testing.T) {
	pool := testenv.Pool(t)
	brokers := testenv.Brokers(t)
	name := testenv.Name(t)
	fx := &testenv.Fixture{Name: name, Table: "public." + name, Topic: name + ".events", Pool: pool}
	ctx := t.Context()
	if _, err := pool.Exec(ctx, testenv.OutboxDDL(fx.Table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+fx.Table) })
	testenv.CreateTopic(t, fx.Topic, 3)
	testenv.CreateTopic(t, name+".dlq", 1)

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	shards := slotstore.AllShards(3)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, sh := range shards {
			_, _ = pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, sh.Slot(name))
			_, _ = pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{sh.Publication(name)}.Sanitize())
		}
	})
	for _, sh := range shards {
		if _, err := slotstore.New(conn.Conn()).Create(ctx, slotstore.CreateOptions{Slot: sh.Slot(name), Publication: sh.Publication(name),
			Tables: []string{fx.Table}, Shard: &sh}); err != nil {
			t.Fatalf("create shard %s: %v", sh, err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+fx.Table+` (aggregate_id, topic, payload)
		SELECT CASE g % 3 WHEN 0 THEN 'order-' || (g % 300) WHEN 1 THEN md5((g % 300)::text) ELSE (g % 300)::text END,
		       't', jsonb_build_object('g', g) FROM generate_series(1, 1000) g`); err != nil {
		t.Fatal(err)
	}

	bySlot := make([][]string, len(shards)) // each shard's row ids, as its slot decodes them
	for i, sh := range shards {
		bySlot[i] = peekInsertIDs(t, conn.Conn(), sh.Slot(name), sh.Publication(name))
	}
	published := []string{}
	for i, sh := range shards {
		p, err := New(Config{Conn: testenv.PGConfig(t), Table: fx.Table, Topic: fx.Topic, DLQTopic: name + ".dlq", Batch: 50,
			Interval: 20 * time.Millisecond, Shard: &sh, Sink: sink.Config{Brokers: brokers}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Check(ctx, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx) }()
		want := len(published) + len(bySlot[i])
		testenv.Eventually(t, 60*time.Second, "shard "+sh.String()+"'s rows marked published", func() bool {
			return len(markedIDs(t, pool, fx.Table)) >= want
		})
		cancel()
		if err := <-done; err != nil && rctx.Err() == nil {
			t.Fatalf("shard %s's poller: %v", sh, err)
		}
		p.Close()
		marked := markedIDs(t, pool, fx.Table)
		wantMarked := slices.Sorted(slices.Values(append(slices.Clone(published), bySlot[i]...)))
		if !slices.Equal(marked, wantMarked) {
			t.Fatalf("after shard %s's poller, %d rows are marked; want the %d the earlier shards' and this shard's slots decode", sh, len(marked), len(wantMarked))
		}
		published = wantMarked
	}
	if len(published) != 1000 {
		t.Fatalf("the three shards' pollers published %d rows, want all 1000", len(published))
	}
	if n := testenv.EndOffset(t, fx.Topic); n != 1000 {
		t.Fatalf("the topic holds %d records, want 1000: one per row", n)
	}
}

// peekInsertIDs is the id (the first column) of each insert slot holds for pub, not consumed.
func peekInsertIDs(t *testing.T, conn *pgx.Conn, slot, pub string) []string {
	t.Helper()
	ids := map[string]bool{}
	for _, ins := range slotpeek.Inserts(t.Context(), t, conn, slot, pub) {
		ids[string(ins.Tuple.Columns[0].Data)] = true
	}
	if len(ids) == 0 {
		t.Fatalf("slot %s holds no insert", slot)
	}
	return slices.Sorted(maps.Keys(ids))
}

func markedIDs(t *testing.T, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, table string) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT id::text FROM `+table+` WHERE published_at IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}
