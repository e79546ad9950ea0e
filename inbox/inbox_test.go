package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/inbox"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// fixture is one test's processed table and an effects table the handlers write to.
type fixture struct {
	pool    *pgxpool.Pool
	table   string
	effects string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := testenv.Pool(t)
	n := testenv.Name(t)
	f := &fixture{pool: pool, table: n + "_inbox", effects: n + "_effects"}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+f.effects+` (outbox_id text, consumer text, applied_at timestamptz DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+f.effects)
		_, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+f.table)
	})
	return f
}

func (f *fixture) inbox(t *testing.T, consumer string) *inbox.Inbox {
	t.Helper()
	in, err := inbox.New(inbox.Config{Consumer: consumer, Table: f.table})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.CreateTable(context.Background(), f.pool); err != nil {
		t.Fatal(err)
	}
	return in
}

// apply is the business effect: one row per processed event.
func (f *fixture) apply(consumer, id string) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+f.effects+` (outbox_id, consumer) VALUES ($1, $2)`, id, consumer)
		return err
	}
}

func (f *fixture) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// process runs Process for id of the table public.outbox.
func (f *fixture) process(t *testing.T, in *inbox.Inbox, consumer, id string) bool {
	t.Helper()
	return f.processFrom(t, in, consumer, "public.outbox", id)
}

func (f *fixture) processFrom(t *testing.T, in *inbox.Inbox, consumer, table, id string) bool {
	t.Helper()
	var ran bool
	err := pgx.BeginFunc(context.Background(), f.pool, func(tx pgx.Tx) error {
		var err error
		ran, err = in.Process(context.Background(), tx, table, id, f.apply(consumer, id))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ran
}

// createPreHeaderTable creates the processed table ident (an SQL identifier) as the inbox
// made it before the outbox-table header: keyed by (consumer, outbox_id).
func (f *fixture) createPreHeaderTable(t *testing.T, ident string) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), `CREATE TABLE `+ident+` (
    consumer     text,
    outbox_id    text,
    processed_at timestamptz DEFAULT now(),
    PRIMARY KEY (consumer, outbox_id)
)`); err != nil {
		t.Fatal(err)
	}
}

// wantEffects reports an error unless the effects table has want rows; note, if any, says why.
func (f *fixture) wantEffects(t *testing.T, want int, note string) {
	t.Helper()
	n := f.count(t, `SELECT count(*) FROM `+f.effects)
	switch {
	case n != want && note != "":
		t.Errorf("%d effects, want %d (%s)", n, want, note)
	case n != want:
		t.Errorf("%d effects, want %d", n, want)
	}
}

// processedOnce runs Process twice for the same id of table: the handler runs the first
// time and not the second.
func (f *fixture) processedOnce(t *testing.T, in *inbox.Inbox, consumer, table, id string) bool {
	t.Helper()
	return f.processFrom(t, in, consumer, table, id) && !f.processFrom(t, in, consumer, table, id)
}

// Injected duplicates, in any order: the handler runs once per id, and the effect table has
// one row per id.
func TestProcessRunsTheHandlerOncePerID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.inbox(t, "billing")
	seq := []string{"1", "2", "2", "3", "1", "3", "3", "4"}
	ran := 0
	for _, id := range seq {
		if f.process(t, in, "billing", id) {
			ran++
		}
	}
	if ran != 4 {
		t.Errorf("handler ran %d times for %d deliveries of 4 ids, want 4", ran, len(seq))
	}
	f.wantEffects(t, 4, "")
	if n := f.count(t, `SELECT count(DISTINCT outbox_id) FROM `+f.effects); n != 4 {
		t.Errorf("%d distinct effects, want 4", n)
	}
}

// Outbox ids are unique per table only: id 1 of a.outbox and id 1 of
// b.outbox are two events, each processed once; a record without the outbox-table header (an
// older relay's) is a third key, deduplicated by its id alone.
func TestTheSameIDFromTwoTablesIsTwoEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.inbox(t, "billing")
	ran := 0
	for _, d := range []struct{ table, id string }{
		{"a.outbox", "1"}, {"b.outbox", "1"}, {"a.outbox", "1"}, {"b.outbox", "1"},
		{"message:outbox", "1"}, {"", "1"}, {"", "1"}, {"a.outbox", "2"},
	} {
		if f.processFrom(t, in, "billing", d.table, d.id) {
			ran++
		}
	}
	if ran != 5 {
		t.Errorf("handler ran %d times, want 5 (a.outbox 1, b.outbox 1, message:outbox 1, no table 1, a.outbox 2)", ran)
	}
}

// Handle takes the source from the record's outbox-table header.
func TestHandleKeysByTheOutboxTableHeader(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.inbox(t, "billing")
	rec := func(table, id string) *kgo.Record {
		r := &kgo.Record{Topic: "x", Headers: []kgo.RecordHeader{{Key: inbox.HeaderOutboxID, Value: []byte(id)}}}
		if table != "" {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: inbox.HeaderOutboxTable, Value: []byte(table)})
		}
		return r
	}
	var got []string
	for _, r := range []*kgo.Record{rec("a.outbox", "1"), rec("b.outbox", "1"), rec("", "1"), rec("b.outbox", "1"), rec("", "1"), rec("a.outbox", "1")} {
		ran, err := in.Handle(context.Background(), f.pool, r, func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
			return f.apply("billing", inbox.OutboxTable(r)+"/"+inbox.OutboxID(r))(ctx, tx)
		})
		if err != nil {
			t.Fatal(err)
		}
		if ran {
			got = append(got, inbox.OutboxTable(r)+"/"+inbox.OutboxID(r))
		}
	}
	if want := []string{"a.outbox/1", "b.outbox/1", "/1"}; !slices.Equal(got, want) {
		t.Errorf("handled %q, want %q", got, want)
	}
}

// A processed table made by the inbox before the outbox-table header is migrated by
// CreateTable (first step), once, also when consumers start together, and FinishMigration;
// its marks keep deduplicating records without the header.
func TestCreateTableMigratesAnOldTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.createPreHeaderTable(t, f.table)
	if _, err := f.pool.Exec(ctx, `INSERT INTO `+f.table+` (consumer, outbox_id) VALUES ('billing', '5'), ('billing', '6')`); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(inbox.Config{Consumer: "billing", Table: "public." + f.table})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := in.CreateTable(ctx, f.pool); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := in.CreateTable(ctx, f.pool); err != nil { // and again, on the migrated table
		t.Fatal(err)
	}
	for range 2 { // the second changes nothing
		if err := in.FinishMigration(ctx, f.pool); err != nil {
			t.Fatal(err)
		}
	}
	var key string
	if err := f.pool.QueryRow(ctx, `SELECT string_agg(a.attname, ',' ORDER BY k.i)
		FROM pg_constraint c, unnest(c.conkey) WITH ORDINALITY k(attnum, i), pg_attribute a
		WHERE c.conrelid = $1::regclass AND c.contype = 'p' AND a.attrelid = c.conrelid AND a.attnum = k.attnum`, f.table).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if key != "consumer,outbox_table,outbox_id" {
		t.Errorf("primary key (%s), want (consumer,outbox_table,outbox_id)", key)
	}
	if n := f.count(t, `SELECT count(*) FROM `+f.table+` WHERE outbox_table = ''`); n != 2 {
		t.Errorf("%d old marks with the empty table, want 2", n)
	}
	if f.processFrom(t, in, "billing", "", "5") {
		t.Error("a record without outbox-table ran again although an old mark has its id")
	}
	if !f.processedOnce(t, in, "billing", "a.outbox", "5") {
		t.Error("a.outbox's id 5 is not processed exactly once after the migration")
	}
}

// oldConsumerInsert is the statement of the inbox before the outbox-table header, as it
// shipped (git history of inbox/inbox.go): consumers still running it during a rolling
// upgrade must keep working once an upgraded one has run CreateTable.
const oldConsumerInsert = `INSERT INTO %s (consumer, outbox_id) VALUES ($1, $2) ON CONFLICT (consumer, outbox_id) DO NOTHING`

// A rolling upgrade: consumers of the version before the outbox-table header and upgraded ones
// share the processed table. CreateTable used to rebuild the primary key at once, and every
// insert of an old consumer then failed (42P10: no unique constraint matches its ON CONFLICT),
// stalling it on every record. Now the old key stays until FinishMigration: both dedupe against
// each other's marks, and a record whose id only another table's mark holds is refused with
// ErrMigrationUnfinished, not skipped.
func TestRollingUpgradeOldAndNewConsumersSideBySide(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.createPreHeaderTable(t, f.table)
	old := func(id string) bool { // the old consumer's mark; true when it was new
		t.Helper()
		tag, err := f.pool.Exec(ctx, fmt.Sprintf(oldConsumerInsert, f.table), "billing", id)
		if err != nil {
			t.Fatalf("the old consumer's insert of id %s: %v", id, err)
		}
		return tag.RowsAffected() == 1
	}
	if !old("5") {
		t.Fatal("old consumer: id 5 not new")
	}
	in := f.inbox(t, "billing") // an upgraded consumer starts: CreateTable
	if !old("7") || old("7") {
		t.Error("old consumer after the upgraded one's CreateTable: id 7 not marked exactly once")
	}
	if f.processFrom(t, in, "billing", "public.outbox", "7") {
		t.Error("upgraded consumer ran the handler for id 7, which the old consumer processed")
	}
	if !f.processFrom(t, in, "billing", "public.outbox", "8") {
		t.Error("upgraded consumer: id 8 not processed")
	}
	if old("8") {
		t.Error("old consumer processed id 8 again after the upgraded one did")
	}
	err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		_, err := in.Process(ctx, tx, "public.other", "8", f.apply("billing", "8"))
		return err
	})
	if !errors.Is(err, inbox.ErrMigrationUnfinished) {
		t.Errorf("id 8 of another table while the old key stands: %v, want ErrMigrationUnfinished (never a silent skip)", err)
	}
	// Every consumer is upgraded: the second step.
	if err := in.FinishMigration(ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	if !f.processedOnce(t, in, "billing", "public.other", "8") {
		t.Error("after FinishMigration, id 8 of public.other is not processed exactly once")
	}
	if f.processFrom(t, in, "billing", "", "5") {
		t.Error("a record without outbox-table ran again although an old mark has its id")
	}
	f.wantEffects(t, 2, "public.outbox 8, public.other 8")
}

// The table's name is quoted everywhere, also inside CreateTable's migration block.
func TestCreateTableWithAnOddName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	odd := f.table + `_O'dd $inbox$`
	t.Cleanup(func() {
		_, _ = f.pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+pgx.Identifier{odd}.Sanitize())
	})
	in, err := inbox.New(inbox.Config{Consumer: "billing", Table: "public." + odd})
	if err != nil {
		t.Fatal(err)
	}
	// A table of the version before outbox-table: both migration steps quote the name.
	f.createPreHeaderTable(t, pgx.Identifier{odd}.Sanitize())
	for range 2 {
		if err := in.CreateTable(context.Background(), f.pool); err != nil {
			t.Fatal(err)
		}
	}
	if !f.processedOnce(t, in, "billing", "a.outbox", "1") {
		t.Error("id 1 not processed exactly once")
	}
	if err := in.FinishMigration(context.Background(), f.pool); err != nil {
		t.Fatal(err)
	}
	if !f.processedOnce(t, in, "billing", "b.outbox", "1") {
		t.Error("id 1 of b.outbox not processed exactly once after FinishMigration")
	}
}

// A name without a schema is public.name, not whatever the search_path finds: when the
// search_path finds an older inbox's table of that name in another schema, CreateTable
// refuses, names the schema.table to configure, and creates nothing in public.
func TestCreateTableRefusesABareNameTheSearchPathFindsElsewhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	schema := f.table + "_S"
	sch := pgx.Identifier{schema}.Sanitize()
	if _, err := f.pool.Exec(ctx, `CREATE SCHEMA `+sch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = f.pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+sch+` CASCADE`) })
	old, err := inbox.New(inbox.Config{Consumer: "billing", Table: schema + "." + f.table})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.CreateTable(ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	bare, err := inbox.New(inbox.Config{Consumer: "billing", Table: f.table})
	if err != nil {
		t.Fatal(err)
	}
	inPublic := `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = $1`
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET search_path TO `+sch+`, public`); err != nil {
		t.Fatal(err)
	}
	err = bare.CreateTable(ctx, conn)
	if _, rerr := conn.Exec(ctx, `RESET search_path`); rerr != nil {
		t.Fatal(rerr)
	}
	if want := `set inbox.Config.Table to "` + schema + "." + f.table + `"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("CreateTable(%q) with %s first on the search_path: %v; want an error containing %s", f.table, schema, err, want)
	}
	if n := f.count(t, inPublic, f.table); n != 0 {
		t.Fatalf("the refused CreateTable made public.%s", f.table)
	}
	// Without that schema on the search_path the bare name is public's table, made as usual.
	if err := bare.CreateTable(ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, inPublic, f.table); n != 1 {
		t.Fatalf("public.%s: %d tables, want 1", f.table, n)
	}
}

// Two consumers with different names each process every id once; the inbox is per consumer.
func TestConsumersAreIndependent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.inbox(t, "billing"), f.inbox(t, "shipping")
	for _, id := range []string{"7", "7", "8"} {
		f.process(t, a, "billing", id)
		f.process(t, b, "shipping", id)
	}
	if n := f.count(t, `SELECT count(*) FROM `+f.effects+` WHERE consumer = 'billing'`); n != 2 {
		t.Errorf("billing: %d effects, want 2", n)
	}
	if n := f.count(t, `SELECT count(*) FROM `+f.effects+` WHERE consumer = 'shipping'`); n != 2 {
		t.Errorf("shipping: %d effects, want 2", n)
	}
}

// Concurrent deliveries of the same id (two consumer instances after a rebalance) serialize on
// the primary key: exactly one handler runs.
func TestConcurrentDuplicatesApplyOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.inbox(t, "billing")
	const workers = 8
	var ran atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			<-start
			err := pgx.BeginFunc(context.Background(), f.pool, func(tx pgx.Tx) error {
				ok, err := in.Process(context.Background(), tx, "public.outbox", "42", f.apply("billing", "42"))
				if ok {
					ran.Add(1)
				}
				return err
			})
			if err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ran.Load() != 1 || f.count(t, `SELECT count(*) FROM `+f.effects) != 1 {
		t.Errorf("handler ran %d times, %d effects; want 1 and 1", ran.Load(), f.count(t, `SELECT count(*) FROM `+f.effects))
	}
}

// A failing handler rolls the mark back with its writes: the redelivery runs it again.
func TestHandlerFailureLeavesTheIDUnprocessed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.inbox(t, "billing")
	boom := errors.New("downstream is down")
	err := pgx.BeginFunc(context.Background(), f.pool, func(tx pgx.Tx) error {
		_, err := in.Process(context.Background(), tx, "public.outbox", "9", func(ctx context.Context, tx pgx.Tx) error {
			if err := f.apply("billing", "9")(ctx, tx); err != nil {
				return err
			}
			return boom
		})
		return err
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the handler's", err)
	}
	if n := f.count(t, `SELECT count(*) FROM `+f.table); n != 0 {
		t.Fatalf("the failed id is marked processed (%d rows)", n)
	}
	if !f.process(t, in, "billing", "9") {
		t.Fatal("the redelivery did not run the handler")
	}
	f.wantEffects(t, 1, "the failed attempt's write rolled back")
}

func TestRecordWithoutOutboxIDIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.inbox(t, "billing")
	_, err := in.Handle(context.Background(), f.pool, &kgo.Record{Topic: "x"}, func(context.Context, pgx.Tx, *kgo.Record) error {
		t.Error("handler ran for a record without an outbox id")
		return nil
	})
	if !errors.Is(err, inbox.ErrNoOutboxID) {
		t.Errorf("err = %v, want ErrNoOutboxID", err)
	}
	if _, err := inbox.New(inbox.Config{}); !errors.Is(err, inbox.ErrNoConsumer) {
		t.Errorf("New without a consumer: %v", err)
	}
}

func TestPruneRemovesOldMarksOfItsConsumer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.inbox(t, "billing"), f.inbox(t, "shipping")
	for _, id := range []string{"1", "2"} {
		f.process(t, a, "billing", id)
		f.process(t, b, "shipping", id)
	}
	if _, err := f.pool.Exec(context.Background(), `UPDATE `+f.table+` SET processed_at = now() - interval '30 days' WHERE outbox_id = '1'`); err != nil {
		t.Fatal(err)
	}
	n, err := a.Prune(context.Background(), f.pool, time.Now().Add(-7*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	if n := f.count(t, `SELECT count(*) FROM `+f.table); n != 3 {
		t.Errorf("%d marks left, want 3 (shipping's old mark is not billing's to prune)", n)
	}
}

// The seed's chaos run on a real Kafka topic: a publisher crashed after its first batch, so
// the topic holds 20 unique events and 5 duplicates. Two consumer instances read it all
// concurrently (a rebalance replay): the effect happens exactly 20 times.
func TestDuplicatesOnARealTopicAreAbsorbed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.inbox(t, "orders-consumer")
	topic := testenv.Name(t)
	testenv.CreateTopic(t, topic, 3)
	cl := testenv.Kafka(t)
	var recs []*kgo.Record
	add := func(id int) {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("order-%d", id)), Value: []byte(`{}`),
			Headers: []kgo.RecordHeader{{Key: "outbox-id", Value: []byte(strconv.Itoa(id))}}})
	}
	for id := 1; id <= 5; id++ { // the crashed publisher's batch
		add(id)
	}
	for id := 1; id <= 20; id++ { // the restarted publisher sends everything unmarked
		add(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := testenv.Consume(t, topic)
	got := cons.WaitFor(t, 60*time.Second, "25 records", func(r []*kgo.Record) bool { return len(r) >= 25 })

	var inserted, skipped atomic.Int32
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for _, r := range got {
				ran, err := in.Handle(ctx, f.pool, r, func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
					return f.apply("orders-consumer", inbox.OutboxID(r))(ctx, tx)
				})
				if err != nil {
					t.Error(err)
					return
				}
				if ran {
					inserted.Add(1)
				} else {
					skipped.Add(1)
				}
			}
		})
	}
	wg.Wait()
	processed := inserted.Load() + skipped.Load()
	t.Logf("processed=%d inserted=%d skipped=%d", processed, inserted.Load(), skipped.Load())
	if processed != 50 || inserted.Load() != 20 || skipped.Load() != 30 {
		t.Errorf("processed=%d inserted=%d skipped=%d; want 50, 20, 30 (2 readers x 25 records, 20 unique)", processed, inserted.Load(), skipped.Load())
	}
	f.wantEffects(t, 20, "")
	if n := f.count(t, `SELECT count(DISTINCT outbox_id) FROM `+f.effects); n != 20 {
		t.Errorf("%d distinct effects, want 20", n)
	}
}
