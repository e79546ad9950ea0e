package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// `run --profile debezium` on Debezium's default outbox table writes what Debezium's Outbox
// Event Router writes (docs/debezium.md; the golden test in tools/internal/bench compares the
// two on 10,000 rows): topic outbox.event.<aggregatetype>, key aggregateid, value the payload's
// text, an id header, and a NULL payload as a tombstone rather than a dead letter.
func TestProfileDebeziumPublishesDebeziumsOutboxTable(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	ctx := context.Background()
	table := e.F.Table + "_dbz"
	if _, err := e.F.Pool.Exec(ctx, `CREATE TABLE `+table+` (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
		aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.F.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })
	if _, err := e.F.Pool.Exec(ctx, `ALTER PUBLICATION `+pgx.Identifier{e.F.Publication}.Sanitize()+` ADD TABLE `+table); err != nil {
		t.Fatal(err)
	}
	aggType := e.F.Name + "_Order"
	topic := "outbox.event." + aggType
	testenv.CreateTopic(t, topic, 3)
	cons := testenv.Consume(t, topic)
	p := e.Start(t, nil, "--table", table, "--profile", "debezium")

	const id1, id2 = "0b5e3f2a-1c4d-4e5f-8a9b-0c1d2e3f4a5b", "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
	if _, err := e.F.Pool.Exec(ctx, `INSERT INTO `+table+` VALUES ($1, $2, 'ünï-1', 'OrderCreated', '{"b": 1, "a": "é"}'), ($3, $2, 'ünï-1', 'OrderDeleted', NULL)`,
		id1, aggType, id2); err != nil {
		t.Fatal(err)
	}
	recs := cons.WaitFor(t, 60*time.Second, "both rows", func(r []*kgo.Record) bool { return len(r) >= 2 })
	want := []struct {
		id    string
		value []byte
	}{{id1, []byte(`{"a": "é", "b": 1}`)}, {id2, nil}}
	for i, w := range want {
		r := recs[i]
		if got := testenv.Header(r, "id"); got != w.id || string(r.Key) != "ünï-1" || string(r.Value) != string(w.value) || (r.Value == nil) != (w.value == nil) {
			t.Errorf("record %d: id header %q, key %q, value %q (nil %v); want id %s, key ünï-1, value %q (nil %v)",
				i, got, r.Key, r.Value, r.Value == nil, w.id, w.value, w.value == nil)
		}
		if got := testenv.Header(r, "outbox-id"); got != w.id {
			t.Errorf("record %d: outbox-id %q, want the relay's own headers kept (%s)", i, got, w.id)
		}
	}
	if recs[0].Partition != recs[1].Partition {
		t.Errorf("one key on partitions %d and %d", recs[0].Partition, recs[1].Partition)
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
}

// The profile names columns the contract table does not have: `run` refuses at start with
// exit 2, naming the column and the profile, instead of dead-lettering every row.
func TestProfileOnATableWithoutItsColumnsIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	_, stderr, code := testenv.Run(t, 30*time.Second, e.Bin, e.Env, "run", "--dlq-topic", e.F.DLQ, "--profile", "debezium")
	last := lastLine(stderr)
	if code != 2 || !strings.Contains(last, `"aggregateid"`) || !strings.Contains(last, "--profile debezium") {
		t.Fatalf("exit %d, message %q; want exit 2 naming aggregateid and the profile", code, last)
	}
}
