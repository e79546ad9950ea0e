package e2e

// What cannot be published is dead-lettered, with what it was and why, and the stream goes on:
// rows that cannot become a record, records Kafka rejects for good, a record too large for the
// producer's buffer.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Rows that cannot become a record (NULL or empty key, NULL topic with no --topic, NULL
// payload, headers that are not an object, a table in the publication without the mapped
// columns) are dead-lettered with the reason, the original key, value and headers, the outbox
// id and the commit LSN; the good rows around them are published and the slot moves past all
// of them: never a silent drop, never a stall.
func TestBadRowsAreDeadLetteredAndTheStreamGoesOn(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t)
	odd := tableOfItsOwn(t, f, "_odd", `(id bigserial primary key, key text, body jsonb)`)
	e := testenv.RelayEnvOf(t, f, true)
	e.CreateSlot(t, f.Table+","+odd)
	p := e.Start(t, nil)
	cons := testenv.Consume(t, f.Topic)
	dlq := testenv.Consume(t, f.DLQ)

	row := `aggregate_id, topic, payload, headers`
	good1 := f.InsertValues(t, f.Table, row, `'k1', $1, '{"n": 1}', NULL`, f.Topic)
	type bad struct {
		id     int64
		key    string
		value  string
		reason string
	}
	bads := []bad{
		{f.InsertValues(t, f.Table, row, `NULL, $1, '{"n": 2}', '{"correlation-id": "c-2"}'`, f.Topic), "", `{"n": 2}`, `column "aggregate_id": aggregate_id is NULL`},
		{f.InsertValues(t, f.Table, row, `'', $1, '{"n": 3}', NULL`, f.Topic), "", `{"n": 3}`, `column "aggregate_id": aggregate_id is empty`},
		{f.InsertValues(t, f.Table, row, `'k3', NULL, '{"n": 4}', NULL`), "k3", `{"n": 4}`, `column "topic": topic is NULL`},
		{f.InsertValues(t, f.Table, row, `'k4', $1, NULL, NULL`, f.Topic), "k4", "", `column "payload": payload is NULL`},
		{f.InsertValues(t, f.Table, row, `'k5', $1, '{"n": 6}', '[1, 2]'`, f.Topic), "k5", `{"n": 6}`, `column "headers": headers is not a JSON object`},
		{f.InsertValues(t, odd, `key, body`, `'k6', '{"n": 7}'`), "", "", `column "aggregate_id": mapped column is not in the relation`},
	}
	good2 := f.InsertValues(t, f.Table, row, `'k1', $1, '{"n": 8}', NULL`, f.Topic)
	end := f.CurrentWAL(t)

	recs := dlq.WaitFor(t, 60*time.Second, "every bad row on the dead-letter topic", func(r []*kgo.Record) bool { return len(r) >= len(bads) })
	byID := byOutboxID(recs)
	for _, b := range bads {
		id := strconv.FormatInt(b.id, 10)
		r := byID[id]
		if r == nil {
			t.Errorf("bad row %d (%s) not dead-lettered", b.id, b.reason)
			continue
		}
		if errText := testenv.Header(r, "dlq-error"); !strings.Contains(errText, b.reason) || !strings.Contains(errText, "bad row") {
			t.Errorf("row %d: dlq-error %q, want it to contain %q", b.id, errText, b.reason)
		}
		if string(r.Key) != b.key {
			t.Errorf("row %d: key %q, want %q", b.id, r.Key, b.key)
		}
		if b.value != "" && !jsonEqual(t, r.Value, []byte(b.value)) {
			t.Errorf("row %d: value %s, want %s", b.id, r.Value, b.value)
		}
		if testenv.Header(r, "dlq-relation") == "" || lsnOf(t, r) == 0 {
			t.Errorf("row %d: no relation or LSN in the dead letter: %v", b.id, r.Headers)
		}
	}
	if r := byID[strconv.FormatInt(bads[0].id, 10)]; r != nil && testenv.Header(r, "correlation-id") != "c-2" {
		t.Errorf("the row's own headers were not kept in the dead letter: %v", r.Headers)
	}
	if r := byID[strconv.FormatInt(bads[5].id, 10)]; r != nil && testenv.Header(r, "dlq-relation") != odd {
		t.Errorf("dlq-relation %q, want %s", testenv.Header(r, "dlq-relation"), odd)
	}

	// The good rows on both sides are published, and nothing else is.
	got := cons.WaitFor(t, 60*time.Second, "the good rows", hasAll([]int64{good1, good2}))
	if len(got) != 2 {
		t.Errorf("%d records on the topic, want the 2 good rows", len(got))
	}
	// No stall: the slot confirms past the last bad row.
	testenv.Eventually(t, 30*time.Second, "the slot to confirm past every row", func() bool { return f.SlotConfirmed(t) >= end })
	if n := strings.Count(p.Output(), "bad row: dead-lettering it"); n != len(bads) {
		t.Errorf("%d bad rows logged, want %d", n, len(bads))
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
}

// Records Kafka rejects for good are dead-lettered with their original key, value and headers
// plus the error, the source LSN and the outbox id, and the stream goes on: a payload over the
// topic's max.message.bytes and a topic name Kafka refuses go to the dead-letter topic; a
// payload larger than the dead-letter topic accepts too goes to the PostgreSQL table
// public.cdc_relay_dead_letters, and only once it is committed there does the slot move past
// it. The relay's search_path puts a schema of the test's own first, holding a dead-letter
// table of the same name: the row goes to public's all the same.
func TestRejectedRecordsAreDeadLetteredAndTheStreamGoesOn(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	ctx := context.Background()
	small := f.LimitedTopic(t, "small", "2048")
	deleteTableLettersAtEnd(t, f)
	decoy := f.Name + "_sp"
	decoyTable := pgx.Identifier{decoy, "cdc_relay_dead_letters"}.Sanitize()
	if _, err := f.Pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{decoy}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = f.Pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{decoy}.Sanitize()+` CASCADE`)
	})
	ddl, err := deadletters.TableDDL(decoy + ".cdc_relay_dead_letters")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}

	p := e.Start(t, []string{"PGOPTIONS=-c search_path=" + decoy + ",public"})
	cons := testenv.Consume(t, f.Topic)
	dlq := testenv.Consume(t, f.DLQ)
	insert := func(key, topic, payload string) int64 {
		t.Helper()
		var id int64
		err := f.Pool.QueryRow(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload, headers) VALUES ($1, $2, $3::jsonb, '{"correlation-id": "c"}') RETURNING id`,
			key, topic, payload).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	big := func(n int) string { return `{"pad": "` + strings.Repeat("x", n) + `"}` }

	good1 := insert("k1", f.Topic, `{"n": 1}`)
	tooLarge := insert("k2", small, big(4096))
	badName := insert("k3", "no spaces allowed!", `{"n": 3}`)
	huge := insert("k4", f.Topic, big(3<<20)) // over every topic's limit, the dead-letter topic's too
	good2 := insert("k1", f.Topic, `{"n": 5}`)
	end := f.CurrentWAL(t)

	recs := dlq.WaitFor(t, 90*time.Second, "two dead letters", func(r []*kgo.Record) bool { return len(r) >= 2 })
	byID := byOutboxID(recs)
	for _, c := range []struct {
		id           int64
		key, topic   string
		errFragments []string
	}{
		{tooLarge, "k2", small, []string{"MESSAGE_TOO_LARGE"}},
		// Kafka's class, and the relay's own topic-name check naming the character it refuses.
		{badName, "k3", "no spaces allowed!", []string{"INVALID_TOPIC_EXCEPTION", `has ' ': Kafka topic names use only ASCII letters`}},
	} {
		r := byID[strconv.FormatInt(c.id, 10)]
		if r == nil {
			t.Errorf("outbox id %d (%v) not on the dead-letter topic", c.id, c.errFragments)
			continue
		}
		for _, frag := range c.errFragments {
			if !strings.Contains(testenv.Header(r, "dlq-error"), frag) {
				t.Errorf("outbox id %d: dlq-error %q lacks %q", c.id, testenv.Header(r, "dlq-error"), frag)
			}
		}
		if string(r.Key) != c.key || testenv.Header(r, "dlq-original-topic") != c.topic || testenv.Header(r, "correlation-id") != "c" {
			t.Errorf("outbox id %d: key %q, original topic %q, headers %v", c.id, r.Key, testenv.Header(r, "dlq-original-topic"), r.Headers)
		}
		if lsnOf(t, r) == 0 {
			t.Errorf("outbox id %d: no cdc-lsn", c.id)
		}
	}
	// Its value is the row's payload, byte for byte: the relay never gives a refused record's
	// buffer back to the stream, which would copy a later payload into it (DESIGN.md, "pgconn
	// reuses its read buffer"; in the race build a buffer given back is overwritten at once).
	if r := byID[strconv.FormatInt(tooLarge, 10)]; r != nil && !jsonEqual(t, r.Value, []byte(big(4096))) {
		t.Errorf("the dead letter lost the original value: %d bytes, %.60q", len(r.Value), r.Value)
	}

	// The huge one is in the PostgreSQL table, whole.
	var (
		outboxID, topic, errText, lsn string
		key, value                    []byte
		corr                          string
	)
	testenv.Eventually(t, 60*time.Second, "the huge record in public.cdc_relay_dead_letters", func() bool {
		err := f.Pool.QueryRow(ctx, `SELECT outbox_id, topic, key, value, error, lsn::text, headers->>'correlation-id'
			FROM public.cdc_relay_dead_letters WHERE slot = $1`, f.Slot).Scan(&outboxID, &topic, &key, &value, &errText, &lsn, &corr)
		return err == nil
	})
	if outboxID != strconv.FormatInt(huge, 10) || topic != f.Topic || string(key) != "k4" || len(value) < 3<<20 || corr != "c" || lsn == "" {
		t.Errorf("dead-letter row: outbox_id %s topic %s key %q value %d bytes correlation-id %q lsn %q", outboxID, topic, key, len(value), corr, lsn)
	}
	var inDecoy int
	if err := f.Pool.QueryRow(ctx, `SELECT count(*) FROM `+decoyTable).Scan(&inDecoy); err != nil || inDecoy != 0 {
		t.Errorf("%d rows (%v) in %s, the search_path's first schema's table: want none", inDecoy, err, decoyTable)
	}
	if !strings.Contains(errText, "MESSAGE_TOO_LARGE") || !strings.Contains(errText, "dead-letter topic "+f.DLQ+" refused it too") {
		t.Errorf("dead-letter row error %q", errText)
	}

	got := cons.WaitFor(t, 60*time.Second, "the good rows", hasAll([]int64{good1, good2}))
	if len(got) != 2 {
		t.Errorf("%d records on the topic, want 2", len(got))
	}
	testenv.Eventually(t, 30*time.Second, "the slot to confirm past every row", func() bool { return f.SlotConfirmed(t) >= end })
	out := p.Output()
	if n := strings.Count(out, "Kafka rejected a record for good: dead-lettering it"); n != 3 {
		t.Errorf("%d rejections logged, want 3", n)
	}
	if !strings.Contains(out, "dead-letter topic refused a record: parked it in PostgreSQL") {
		t.Errorf("the table fallback was not logged")
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", out)
	}
}

// The too-large-alone check compared key + value with --max-buffered-bytes, but franz-go counts
// the headers too: a 510 KB payload with 20 KB of headers under --max-buffered-bytes 524288 was
// neither published nor dead-lettered; the relay exited 1 ("not delivered: MESSAGE_TOO_LARGE
// ... uncompressed_bytes=530130"), and every restart did the same, without naming the flag. Now
// it is dead-lettered (here in the table: the letter is as large) with a reason that names the
// limit and the flag, and the rows after it arrive.
func TestRecordTooLargeForTheBufferWithItsHeadersIsDeadLettered(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	ctx := context.Background()
	deleteTableLettersAtEnd(t, f)
	p := e.Start(t, nil, "--max-buffered-bytes", "524288")
	var bigID int64
	if err := f.Pool.QueryRow(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload, headers)
		VALUES ('big', $1, to_jsonb(repeat('x', 510000)), jsonb_build_object('big', repeat('h', 20000))) RETURNING id`, f.Topic).Scan(&bigID); err != nil {
		t.Fatal(err)
	}
	after := f.Insert(t, false, testenv.Row{Key: "k", Payload: `{"after":1}`})
	cons := testenv.Consume(t, f.Topic)
	cons.WaitFor(t, 60*time.Second, "the row after the large one", testenv.HasAll(after))
	var reason string
	testenv.Eventually(t, 60*time.Second, "the large record in the dead-letter table", func() bool {
		_ = f.Pool.QueryRow(ctx, `SELECT error FROM public.cdc_relay_dead_letters WHERE slot = $1 AND outbox_id = $2`, f.Slot, strconv.FormatInt(bigID, 10)).Scan(&reason)
		return reason != "" || p.Exited()
	})
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
	if !strings.Contains(reason, "--max-buffered-bytes 524288") || !strings.Contains(reason, "headers") {
		t.Errorf("the dead letter's reason does not name the limit and the flag: %q", reason)
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
