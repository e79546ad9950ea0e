package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// pollEnv is one test's poller: its fixture (no slot) and binary.
type pollEnv struct {
	F   *testenv.Fixture
	Bin string
}

// newPollEnv makes a fixture and its pending-rows index with `cdc-relay poll --create-index`.
func newPollEnv(t *testing.T) *pollEnv {
	t.Helper()
	e := &pollEnv{F: testenv.NewFixture(t), Bin: testenv.Binary(t, true)}
	out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, nil, "poll", "--create-index", "--table", e.F.Table)
	if code != 0 {
		t.Fatalf("poll --create-index: exit %d\n%s%s", code, out, errOut)
	}
	return e
}

// start runs `cdc-relay poll` on the fixture's table with its DLQ topic.
func (e *pollEnv) Start(t *testing.T, extraEnv []string, args ...string) *testenv.Proc {
	t.Helper()
	a := append([]string{"poll", "--table", e.F.Table, "--dlq-topic", e.F.DLQ, "--interval", "20ms"}, args...)
	return testenv.Start(t, e.Bin, extraEnv, a...)
}

// pending counts the rows not yet marked published.
func (e *pollEnv) pending(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.F.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+e.F.Table+` WHERE published_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var publishedLog = regexp.MustCompile(`msg=stopped .*published=(\d+)`)

// publishedBy reads the count a stopped poller logged.
func publishedBy(t *testing.T, p *testenv.Proc) int {
	t.Helper()
	m := publishedLog.FindStringSubmatch(p.Output())
	if m == nil {
		t.Fatalf("no final 'stopped' log line in the poller's output:\n%s", p.Output())
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// `poll` gives consumers the record `run` gives them: every committed row once, key, value,
// event type and the row's headers; no cdc-lsn, and cdc-commit-time from created_at. Rows of
// rolled-back transactions never arrive; per key, rows arrive in id order. A bad row is
// dead-lettered with its reason and marked published.
func TestPollDeliversEveryRowWithTheRunRecord(t *testing.T) {
	t.Parallel()
	e := newPollEnv(t)
	cons := testenv.Consume(t, e.F.Topic)
	dlq := testenv.Consume(t, e.F.DLQ)

	var committed, rolledBack []int64
	for i := 0; i < 30; i++ {
		committed = append(committed, e.F.Insert(t, false, testenv.Row{Key: fmt.Sprintf("k%d", i%5), Payload: fmt.Sprintf(`{"i": %d}`, i)})...)
		if i%6 == 0 {
			rolledBack = append(rolledBack, e.F.Insert(t, true,
				testenv.Row{Key: "k1", Payload: `{"rolled": "back"}`},
				testenv.Row{Key: "k2", Payload: `{"rolled": "back"}`})...)
		}
	}
	// Written before the poller starts (a backlog larger than a batch) and while it runs.
	p := e.Start(t, nil, "--batch", "7")
	for i := 0; i < 10; i++ {
		var rows []testenv.Row
		for j := 0; j < 5; j++ {
			rows = append(rows, testenv.Row{Key: fmt.Sprintf("k%d", (i+j)%2), Payload: fmt.Sprintf(`{"tx": %d, "j": %d}`, i, j), EventType: "order.updated"})
		}
		committed = append(committed, e.F.Insert(t, false, rows...)...)
	}
	special := e.F.Insert(t, false, testenv.Row{Key: "k1", Payload: `{"special": true}`, EventType: "order.created",
		Headers: `{"correlation-id": "c-1", "traceparent": "00-abc-def-01", "attempt": 3}`})
	committed = append(committed, special...)
	bad := e.F.Insert(t, false, testenv.Row{Key: "", Payload: `{"bad": "empty key"}`})

	recs := cons.WaitFor(t, 60*time.Second, "every committed row", hasAll(committed))
	dead := dlq.WaitFor(t, 60*time.Second, "the bad row on the dead-letter topic", hasAll(bad))
	testenv.Eventually(t, 30*time.Second, "every row marked published", func() bool { return e.pending(t) == 0 })
	p.Stop(t)

	got := assertCleanDelivery(t, recs, committed, rolledBack)

	order := newKeyOrder()
	for _, r := range recs {
		id, _ := strconv.ParseInt(testenv.Header(r, "outbox-id"), 10, 64)
		var key, payload string
		var eventType *string
		var created time.Time
		if err := e.F.Pool.QueryRow(t.Context(), `SELECT aggregate_id, payload::text, event_type, created_at FROM `+e.F.Table+` WHERE id = $1`, id).
			Scan(&key, &payload, &eventType, &created); err != nil {
			t.Fatalf("row %d: %v", id, err)
		}
		if string(r.Key) != key || testenv.Header(r, "aggregate-id") != key {
			t.Errorf("row %d: key %q, aggregate-id header %q, want %q", id, r.Key, testenv.Header(r, "aggregate-id"), key)
		}
		if string(r.Value) != payload {
			t.Errorf("row %d: value %s, want the column's text %s", id, r.Value, payload)
		}
		if want := deref(eventType); testenv.Header(r, "event-type") != want {
			t.Errorf("row %d: event-type %q, want %q", id, testenv.Header(r, "event-type"), want)
		}
		if r.Topic != e.F.Topic {
			t.Errorf("row %d: topic %q", id, r.Topic)
		}
		if lsn := testenv.Header(r, "cdc-lsn"); lsn != "" {
			t.Errorf("row %d: poll set cdc-lsn %q; it has no LSN to give", id, lsn)
		}
		if want, got := created.UTC().Format(record.CommitTimeLayout), testenv.Header(r, "cdc-commit-time"); got != want {
			t.Errorf("row %d: cdc-commit-time %q, want created_at %q", id, got, want)
		}
		order.check(t, key, id, r)
	}
	for _, r := range recs {
		if testenv.Header(r, "outbox-id") != strconv.FormatInt(special[0], 10) {
			continue
		}
		// The same headers, in the same order, as the relay's decoder gives (sorted by key).
		want := []kgo.RecordHeader{
			{Key: "outbox-id", Value: []byte(strconv.FormatInt(special[0], 10))},
			{Key: "outbox-table", Value: []byte(e.F.Table)},
			{Key: "aggregate-id", Value: []byte("k1")},
			{Key: "event-type", Value: []byte("order.created")},
			{Key: "attempt", Value: []byte("3")},
			{Key: "correlation-id", Value: []byte("c-1")},
			{Key: "traceparent", Value: []byte("00-abc-def-01")},
		}
		if len(r.Headers) != len(want)+1 {
			t.Errorf("special row: %d headers, want %d: %v", len(r.Headers), len(want)+1, r.Headers)
			continue
		}
		for i, h := range want {
			if r.Headers[i].Key != h.Key || string(r.Headers[i].Value) != string(h.Value) {
				t.Errorf("special row: header %d = %s=%q, want %s=%q", i, r.Headers[i].Key, r.Headers[i].Value, h.Key, h.Value)
			}
		}
		if k := r.Headers[len(want)].Key; k != "cdc-commit-time" {
			t.Errorf("special row: last header %q, want cdc-commit-time", k)
		}
	}
	for _, r := range dead {
		if testenv.Header(r, "dlq-error") == "" || testenv.Header(r, "dlq-original-topic") != e.F.Topic {
			t.Errorf("dead-letter record without its reason or original topic: %v", r.Headers)
		}
	}
	if got[strconv.FormatInt(bad[0], 10)] != 0 {
		t.Errorf("the bad row reached its own topic")
	}
}

// kill -9 after Kafka acknowledged a batch and before its rows were marked: the rows stay
// pending, the restarted poller publishes them again, and nothing is lost. Duplicates come
// only from the batch in flight at the kill.
func TestPollKill9MidRunLosesNothing(t *testing.T) {
	t.Parallel()
	e := newPollEnv(t)
	all := insertInterleavedTxns(t, e.F)
	const batch = 20
	p := e.Start(t, []string{"CDC_RELAY_TEST_CRASH_AFTER_BATCHES=3"}, "--batch", strconv.Itoa(batch))
	_, sig := p.Wait(t, 60*time.Second)
	if sig != syscall.SIGKILL {
		t.Fatalf("poller was not killed by the hook (signal %v); output:\n%s", sig, p.Output())
	}
	if n := e.pending(t); n != len(all)-2*batch {
		t.Fatalf("%d rows pending after the kill, want %d: two batches marked, the third acknowledged but not marked", n, len(all)-2*batch)
	}
	cons := testenv.Consume(t, e.F.Topic)
	cons.WaitFor(t, 30*time.Second, "the three acknowledged batches", func(r []*kgo.Record) bool { return len(r) >= 3*batch })

	e.Start(t, nil, "--batch", strconv.Itoa(batch))
	cons.WaitFor(t, 60*time.Second, "every row after the restart", hasAll(all))
	testenv.Eventually(t, 30*time.Second, "every row marked published", func() bool { return e.pending(t) == 0 })
	// A row is marked only after Kafka acknowledged it: now the topic holds everything, the
	// replayed batch included, and the consumer reads up to its end before judging duplicates.
	end := testenv.EndOffset(t, e.F.Topic)
	recs := cons.WaitFor(t, 30*time.Second, "every record on the topic", func(r []*kgo.Record) bool { return int64(len(r)) >= end })
	got := ids(recs)
	dups := 0
	for _, id := range all {
		switch n := got[strconv.FormatInt(id, 10)]; {
		case n == 0:
			t.Errorf("outbox id %d lost", id)
		case n > 1:
			dups++
		}
	}
	if dups == 0 || dups > batch {
		t.Errorf("%d rows published twice; want the killed batch's rows, 1 to %d", dups, batch)
	}
	t.Logf("%d rows, %d records, %d rows published twice", len(all), len(recs), dups)
}

// Two pollers on one table, both busy while rows are written: FOR UPDATE SKIP LOCKED hands
// every row to one of them, so a clean run publishes each row exactly once.
func TestTwoPollersNeverPublishARowTwice(t *testing.T) {
	t.Parallel()
	e := newPollEnv(t)
	cons := testenv.Consume(t, e.F.Topic)
	insert := func(n, from int) []int64 {
		var out []int64
		for i := 0; i < n; i += 10 {
			var rows []testenv.Row
			for j := 0; j < 10; j++ {
				rows = append(rows, testenv.Row{Key: fmt.Sprintf("k%d", (from+i+j)%13), Payload: fmt.Sprintf(`{"n": %d}`, from+i+j)})
			}
			out = append(out, e.F.Insert(t, false, rows...)...)
		}
		return out
	}
	all := insert(1500, 0)
	a := e.Start(t, nil, "--batch", "10")
	b := e.Start(t, nil, "--batch", "10")
	all = append(all, insert(500, 1500)...)

	recs := cons.WaitFor(t, 90*time.Second, "every row", hasAll(all))
	testenv.Eventually(t, 30*time.Second, "every row marked published", func() bool { return e.pending(t) == 0 })
	for _, p := range []*testenv.Proc{a, b} {
		if code := p.Stop(t); code != 0 {
			t.Fatalf("poller exited %d:\n%s", code, p.Output())
		}
	}
	na, nb := publishedBy(t, a), publishedBy(t, b)
	if na == 0 || nb == 0 || na+nb != len(all) {
		t.Errorf("pollers published %d and %d rows, want both busy and %d in all", na, nb, len(all))
	}
	for id, n := range ids(recs) {
		if n != 1 {
			t.Errorf("outbox id %s published %d times by two pollers in a clean run", id, n)
		}
	}
	if len(recs) != len(all) {
		t.Errorf("got %d records, want %d", len(recs), len(all))
	}
}

// Configuration mistakes exit 2 with a message that names them; --help exits 0.
func TestPollUsageErrors(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t)
	bin := testenv.Binary(t, true)
	if _, err := f.Pool.Exec(context.Background(), `ALTER TABLE `+f.Table+` DROP COLUMN created_at`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{"help", []string{"poll", "--help"}, nil, 0, ""},
		{"no brokers", []string{"poll", "--table", f.Table}, []string{"CDC_RELAY_BROKERS="}, 2, "--brokers is required"},
		{"no table", []string{"poll", "--table", f.Table + "_missing"}, nil, 2, "outbox table not found"},
		{"missing column", []string{"poll", "--table", f.Table}, nil, 2, `no column "created_at" (map it with --column-created-at)`},
		{"bad batch", []string{"poll", "--table", f.Table, "--batch", "0"}, nil, 2, "--batch 0"},
		{"bad delivery", []string{"poll", "--table", f.Table, "--delivery", "exactly-twice"}, nil, 2, `--delivery "exactly-twice": use at-least-once (the default) or exactly-once`},
		{"transactional id without exactly-once", []string{"poll", "--table", f.Table, "--transactional-id", "x"}, nil, 2,
			"--transactional-id applies only with --delivery exactly-once (the delivery is at-least-once)"},
		{"ack timeout past the transaction's", []string{"poll", "--table", f.Table, "--delivery", "exactly-once", "--ack-timeout", "20s"}, nil, 2,
			"--ack-timeout 20s: with --delivery exactly-once"},
		{"bad checkpoint topic", []string{"poll", "--table", f.Table, "--delivery", "exactly-once", "--checkpoint-topic", "a b"}, nil, 2, "--checkpoint-topic"},
		{"checkpoints in the dead-letter topic", []string{"poll", "--table", f.Table, "--delivery", "exactly-once", "--checkpoint-topic", "cdc-relay.dlq"}, nil, 2,
			"--checkpoint-topic cdc-relay.dlq is also a topic records go to"},
	} {
		out, errOut, code := testenv.Run(t, 30*time.Second, bin, c.env, c.args...)
		if code != c.code || !regexp.MustCompile(regexp.QuoteMeta(c.want)).MatchString(errOut) {
			t.Errorf("%s: exit %d, want %d with %q in stderr:\n%s%s", c.name, code, c.code, c.want, out, errOut)
		}
	}
}

// A batch the broker refuses as too large although each of its records fits the topic on its
// own (max.message.bytes lowered while `poll` ran, after it read the old limit; franz-go fails
// every record of a refused batch) is not the records' fault: its rows stay pending, nothing
// reaches the dead-letter topic, and once the topic takes the batch again they are published
// to it. `poll` dead-lettered every record of such a batch (sink.Rejected), where `run` keeps
// them: the events went to the dead-letter topic and their rows were marked published.
func TestPollKeepsABatchRefusedAsTooLargePending(t *testing.T) {
	t.Parallel()
	e := newPollEnv(t)
	lim := e.F.LimitedTopic(t, "lim", "100000")
	dlq := testenv.Consume(t, e.F.DLQ)
	// A cycle's records go in one batch, sent uncompressed: the broker measures the batch as sent,
	// and the repeated payloads would compress under the lowered limit.
	p := e.Start(t, nil, "--linger", "300ms", "--compression", "none")
	payload := `{"p": "` + strings.Repeat("x", 1000) + `"}`
	e.F.Insert(t, false, testenv.Row{Key: "k", Topic: lim, Payload: payload})
	testenv.Eventually(t, 30*time.Second, "the first row published (the poller read the topic's limit)", func() bool { return e.pending(t) == 0 })

	setLimit := func(v string) { testenv.SetTopicConfig(t, lim, "max.message.bytes", v) }
	setLimit("4000") // each ~1.2 KB record fits; the batch of ten does not
	rows := make([]testenv.Row, 10)
	for i := range rows {
		rows[i] = testenv.Row{Key: "k", Topic: lim, Payload: payload}
	}
	e.F.Insert(t, false, rows...)
	refused := func() bool {
		return strings.Contains(p.Output(), "cycle failed") && strings.Contains(p.Output(), "MESSAGE_TOO_LARGE")
	}
	testenv.Eventually(t, 30*time.Second, "the batch refused as too large, or its rows gone", func() bool { return refused() || e.pending(t) < 10 })
	if n := e.pending(t); n != 10 || !refused() {
		t.Fatalf("%d rows pending, want all 10: the batch refused as too large was dead-lettered or published (refusal logged: %v):\n%s",
			n, refused(), p.Output())
	}

	setLimit("100000")
	testenv.Eventually(t, 60*time.Second, "the rows published once the topic takes the batch", func() bool { return e.pending(t) == 0 })
	p.Stop(t)
	if got := testenv.EndOffset(t, lim); got != 11 {
		t.Errorf("%s holds %d records, want 11", lim, got)
	}
	if recs := dlq.Records(); len(recs) != 0 {
		t.Errorf("%d records on the dead-letter topic, want none: every record fit the topic on its own", len(recs))
	}
}
