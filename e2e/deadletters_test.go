package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/deadletters"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// dlCLI runs `cdc-relay dead-letters ...` and returns its stdout+stderr and exit code.
func dlCLI(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := testenv.Run(t, 90*time.Second, bin, env, append([]string{"dead-letters"}, args...)...)
	t.Logf("dead-letters %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	return out + errOut, code
}

// dlMust runs `cdc-relay dead-letters args...` and fails the test unless it exits 0 saying want.
func dlMust(t *testing.T, bin string, env []string, want string, args ...string) {
	t.Helper()
	if out, code := dlCLI(t, bin, env, args...); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("dead-letters %s: exit %d, want 0 and %q in the output", strings.Join(args, " "), code, want)
	}
}

// lineWith returns the first line of out that contains every fragment.
func lineWith(out string, frags ...string) string {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, f := range frags {
			ok = ok && strings.Contains(line, f)
		}
		if ok {
			return line
		}
	}
	return ""
}

// marksTable is the name of a marks table of the test's own, dropped when it ends.
func marksTable(t *testing.T, f *testenv.Fixture) string {
	marks := "public." + f.Name + "_marks"
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+marks) })
	return marks
}

// tableEnv is the environment of `dead-letters` for the letters in the dead-letter table.
func tableEnv(table string) []string {
	return []string{"CDC_RELAY_FROM=table", "CDC_RELAY_DEAD_LETTER_TABLE=" + table}
}

// topicEnv is the environment of `dead-letters` for the letters on the topic dlq, marked in
// the table marks.
func topicEnv(dlq, marks string) []string {
	return []string{"CDC_RELAY_DLQ_TOPIC=" + dlq, "CDC_RELAY_MARKS_TABLE=" + marks}
}

// topicLetters is a test's fixture, the binary, and the environment of `dead-letters` for the
// letters on the fixture's dead-letter topic, marked in a table of the test's own.
func topicLetters(t *testing.T) (f *testenv.Fixture, bin string, env []string) {
	t.Helper()
	f = testenv.NewFixture(t)
	return f, testenv.Binary(t, false), topicEnv(f.DLQ, marksTable(t, f))
}

// relayTopicLetters is a test's relay and the environment of `dead-letters` (the relay's plus
// the dead-letter topic and a marks table of the test's own) for the letters it parks.
func relayTopicLetters(t *testing.T) (e *testenv.RelayEnv, env []string) {
	t.Helper()
	e = testenv.NewRelayEnv(t, false)
	return e, append(append([]string{}, e.Env...), topicEnv(e.F.DLQ, marksTable(t, e.F))...)
}

// tableLetters is a test's fixture, the binary, a dead-letter table of the test's own (see
// deadLetterTable) and the environment of `dead-letters` for the letters in it.
func tableLetters(t *testing.T, preClass bool) (f *testenv.Fixture, bin, table string, env []string) {
	t.Helper()
	f = testenv.NewFixture(t)
	bin = testenv.Binary(t, false)
	table = deadLetterTable(t, f, preClass)
	return f, bin, table, tableEnv(table)
}

// wantNoLettersWaiting reports an error unless `dead-letters list` says none is waiting.
func wantNoLettersWaiting(t *testing.T, bin string, env []string, after string) {
	t.Helper()
	if out, _ := dlCLI(t, bin, env, "list"); !strings.Contains(out, "no dead letters waiting") {
		t.Errorf("list after %s shows letters", after)
	}
}

// Letters the relay parked on the dead-letter topic (a record too large for its topic, one for
// a topic that does not exist) are listed, refused while their cause holds, replayed once it is
// fixed (original key, value and headers plus cdc-replayed-at, without dlq-*), not sent again by
// a second replay; a letter that no replay can fix is discarded.
func TestDeadLettersFromTopicListReplayDiscard(t *testing.T) {
	t.Parallel()
	e, env := relayTopicLetters(t)
	f := e.F
	small := f.LimitedTopic(t, "small", "2048")
	later := f.Name + ".later" // created only once the letter is to be replayed
	adm := kadm.NewClient(testenv.Kafka(t))
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), later) })

	p := e.Start(t, nil)
	dlq := testenv.Consume(t, f.DLQ)
	ids := f.Insert(t, false,
		testenv.Row{Key: "k2", Topic: small, Payload: `{"pad": "` + strings.Repeat("x", 4096) + `"}`, Headers: `{"correlation-id": "c2"}`})
	ids = append(ids, f.Insert(t, false, testenv.Row{Key: "k3", Topic: later, Payload: `{"n": 3}`, EventType: "created", Headers: `{"correlation-id": "c3"}`})...)
	ids = append(ids, f.Insert(t, false, testenv.Row{Key: "k4", Topic: "no spaces allowed!", Payload: `{"n": 4}`})...)
	tooLarge, missing, badName := strconv.FormatInt(ids[0], 10), strconv.FormatInt(ids[1], 10), strconv.FormatInt(ids[2], 10)
	dlq.WaitFor(t, 120*time.Second, "three dead letters", func(r []*kgo.Record) bool { return len(r) >= 3 })
	stopClean(t, p, "the relay")

	out, code := dlCLI(t, e.Bin, env, "list")
	if code != 0 {
		t.Fatalf("list: exit %d", code)
	}
	for _, c := range []struct{ id, reason, topic string }{
		{tooLarge, "MESSAGE_TOO_LARGE", small},
		{missing, "UNKNOWN_TOPIC_OR_PARTITION", later},
		{badName, "INVALID_TOPIC_EXCEPTION", "no spaces allowed!"},
	} {
		line := lineWith(out, " "+c.id+" ", c.reason, c.topic, f.Table, " 1 ", "pending")
		if line == "" {
			t.Errorf("list has no line for outbox id %s (%s, source %s, topic %s, count 1)", c.id, c.reason, f.Table, c.topic)
		}
	}
	if out, code := dlCLI(t, e.Bin, env, "list", "--reason", "too_large"); code != 0 || lineWith(out, tooLarge) == "" || lineWith(out, " "+missing+" ") != "" {
		t.Errorf("list --reason too_large: exit %d, want only outbox id %s", code, tooLarge)
	}
	letterID := strings.Fields(lineWith(out, "MESSAGE_TOO_LARGE"))[8]
	if out, code := dlCLI(t, e.Bin, env, "show", letterID); code != 0 || !strings.Contains(out, "value size:     4") ||
		!strings.Contains(out, `correlation-id: "c2"`) || !strings.Contains(out, "MESSAGE_TOO_LARGE") {
		t.Errorf("show %s: exit %d", letterID, code)
	}

	// The causes hold: nothing is sent, and each refusal says why.
	_, code = dlCLI(t, e.Bin, env, "replay", "--all", "--dry-run")
	if code != 0 {
		t.Errorf("replay --dry-run: exit %d", code)
	}
	out, code = dlCLI(t, e.Bin, env, "replay", "--all")
	if code != 1 || !strings.Contains(out, "topic "+later+" does not exist") || !strings.Contains(out, "max.message.bytes") ||
		!strings.Contains(out, "replayed 0, refused 3 (") {
		t.Errorf("replay with the causes present: exit %d, want 1 with both causes said", code)
	}
	if n := testenv.EndOffset(t, small); n != 0 {
		t.Errorf("%d records on %s after a refused replay", n, small)
	}
	// Fix the causes.
	testenv.SetTopicConfig(t, small, "max.message.bytes", "1048576")
	testenv.CreateTopic(t, later, 1)
	out, code = dlCLI(t, e.Bin, env, "replay", "--reason", "TOO_LARGE")
	if code != 0 || !strings.Contains(out, "replayed 1, refused 0, skipped 0") {
		t.Errorf("replay --reason TOO_LARGE after the fix: exit %d", code)
	}
	out, code = dlCLI(t, e.Bin, env, "replay", "--topic", later)
	if code != 0 || !strings.Contains(out, "replayed 1, refused 0, skipped 0") {
		t.Errorf("replay --topic %s after the fix: exit %d", later, code)
	}
	check := func(topic, id, key, corr string, valueLen int) {
		recs := testenv.Consume(t, topic).WaitFor(t, 30*time.Second, "the replayed record on "+topic, func(r []*kgo.Record) bool { return len(r) >= 1 })
		r := recs[0]
		if len(recs) != 1 || string(r.Key) != key || testenv.Header(r, "outbox-id") != id || testenv.Header(r, "outbox-table") != f.Table ||
			testenv.Header(r, "correlation-id") != corr || testenv.Header(r, "cdc-lsn") == "" || testenv.Header(r, "cdc-replayed-at") == "" ||
			len(r.Value) != valueLen {
			t.Errorf("%s: %d records; key %q headers %v value %d bytes", topic, len(recs), r.Key, r.Headers, len(r.Value))
		}
		for _, h := range r.Headers {
			if strings.HasPrefix(h.Key, "dlq-") {
				t.Errorf("%s: replayed record has %s", topic, h.Key)
			}
		}
	}
	check(small, tooLarge, "k2", "c2", len(`{"pad": "`)+4096+len(`"}`))
	check(later, missing, "k3", "c3", len(`{"n": 3}`))

	// A second replay sends nothing; the bad name still cannot go, so it is discarded.
	out, code = dlCLI(t, e.Bin, env, "replay", "--reason", "TOO_LARGE")
	if code != 0 || !strings.Contains(out, "replayed 0, refused 0, skipped 1") {
		t.Errorf("second replay: exit %d", code)
	}
	if n := testenv.EndOffset(t, small); n != 1 {
		t.Errorf("%d records on %s after a second replay, want 1", n, small)
	}
	out, code = dlCLI(t, e.Bin, env, "discard", "--outbox-id", badName)
	if code != 0 || !strings.Contains(out, "discarded 1, skipped 0") {
		t.Errorf("discard: exit %d", code)
	}
	out, _ = dlCLI(t, e.Bin, env, "list")
	if !strings.Contains(out, "no dead letters waiting") {
		t.Errorf("list after replay and discard shows letters")
	}
	out, _ = dlCLI(t, e.Bin, env, "list", "--all")
	if lineWith(out, " "+tooLarge+" ", "replayed") == "" || lineWith(out, " "+badName+" ", "discarded") == "" {
		t.Errorf("list --all does not show the handled letters")
	}
	if n := testenv.EndOffset(t, f.DLQ); n != 3 {
		t.Errorf("%d records on the dead-letter topic, want the 3 (Kafka data is never deleted)", n)
	}
}

// A letter in the PostgreSQL dead-letter table is refused while its topic is missing, replayed
// once it exists, marked replayed_at, not sent again; another is discarded (discarded_at).
func TestDeadLettersFromTableReplayDiscard(t *testing.T) {
	t.Parallel()
	f, bin, table, env := tableLetters(t, false)
	ctx := context.Background()
	later := f.Name + ".later"
	adm := kadm.NewClient(testenv.Kafka(t))
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), later) })
	insert := func(id, topic, key string) {
		t.Helper()
		hdrs := `{"outbox-id": "` + id + `", "outbox-table": "public.orders", "aggregate-id": "` + key + `", "cdc-lsn": "0/16B3748",
			"correlation-id": "c` + id + `", "dlq-error": "UNKNOWN_TOPIC_OR_PARTITION: x", "dlq-original-topic": "` + topic + `"}`
		_, err := f.Pool.Exec(ctx, `INSERT INTO `+table+` (slot, outbox_id, topic, key, value, headers, error, class, lsn)
			VALUES ('s1', $1, $2, $3, $4, $5::jsonb, 'UNKNOWN_TOPIC_OR_PARTITION: x; dead-letter topic d refused it too: TOPIC_AUTHORIZATION_FAILED', 'UNKNOWN_TOPIC_OR_PARTITION', '0/16B3748')`,
			id, topic, []byte(key), []byte(`{"v": `+id+`}`), hdrs)
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("7", later, "k7")
	insert("8", "gone-for-good", "k8")
	out, code := dlCLI(t, bin, env, "list")
	if code != 0 || lineWith(out, "UNKNOWN_TOPIC_OR_PARTITION", "public.orders", " 7 ", later, " 1 ") == "" {
		t.Errorf("list: exit %d", code)
	}
	out, code = dlCLI(t, bin, env, "replay", "--outbox-id", "7")
	if code != 1 || !strings.Contains(out, "topic "+later+" does not exist") || !strings.Contains(out, "refused 1 (topic missing: 1)") {
		t.Errorf("replay with the topic missing: exit %d", code)
	}
	testenv.CreateTopic(t, later, 1)
	out, code = dlCLI(t, bin, env, "replay", "--outbox-id", "7")
	if code != 0 || !strings.Contains(out, "replayed 1, refused 0, skipped 0") {
		t.Errorf("replay after creating the topic: exit %d", code)
	}
	r := testenv.Consume(t, later).WaitFor(t, 30*time.Second, "the replayed record", func(r []*kgo.Record) bool { return len(r) >= 1 })[0]
	if string(r.Key) != "k7" || string(r.Value) != `{"v": 7}` || testenv.Header(r, "correlation-id") != "c7" || testenv.Header(r, "outbox-id") != "7" ||
		testenv.Header(r, "cdc-replayed-at") == "" || testenv.Header(r, "dlq-error") != "" || r.Headers[0].Key != "outbox-id" {
		t.Errorf("replayed record: key %q value %q headers %v", r.Key, r.Value, r.Headers)
	}
	out, code = dlCLI(t, bin, env, "replay", "--all")
	if code != 1 || !strings.Contains(out, "replayed 0, refused 1 (topic missing: 1), skipped 1") {
		t.Errorf("replay --all: exit %d, want the handled one skipped and the other refused", code)
	}
	if n := testenv.EndOffset(t, later); n != 1 {
		t.Errorf("%d records on %s, want 1", n, later)
	}
	out, code = dlCLI(t, bin, env, "discard", "--topic", "gone-for-good")
	if code != 0 || !strings.Contains(out, "discarded 1, skipped 0") {
		t.Errorf("discard: exit %d", code)
	}
	var replayed, discarded int
	err := f.Pool.QueryRow(ctx, `SELECT count(replayed_at), count(discarded_at) FROM `+pgx.Identifier{"public", f.Name + "_dl"}.Sanitize()).Scan(&replayed, &discarded)
	if err != nil || replayed != 1 || discarded != 1 {
		t.Errorf("replayed_at %d, discarded_at %d (%v): want 1 and 1", replayed, discarded, err)
	}
	wantNoLettersWaiting(t, bin, env, "replay and discard")
}

// A logical message without a payload whose id reads like a Kafka error code is a bad row.
// Replay used to classify letters by a pattern over the error text, took ORDER_42_CREATED
// for a Kafka refusal, and published key k with a null value: a tombstone that deletes the
// key on a compacted topic. The class is now recorded when the letter is parked (dlq-class),
// and replay never publishes a bad row.
func TestDeadLetterReplayNeverPublishesABadRowWhoseIDLooksLikeAnErrorCode(t *testing.T) {
	t.Parallel()
	e, env := relayTopicLetters(t)
	f := e.F
	ctx := context.Background()
	prefix := f.Name // logical messages reach every slot (DESIGN.md, "Logical messages")
	p := e.Start(t, nil, "--message-prefix", prefix)
	dlq := testenv.Consume(t, f.DLQ)
	if _, err := f.Pool.Exec(ctx, `SELECT pg_logical_emit_message(true, $1, $2::text)`, prefix,
		`{"id": "ORDER_42_CREATED", "key": "k", "topic": "`+f.Topic+`"}`); err != nil {
		t.Fatal(err)
	}
	letter := dlq.WaitFor(t, 60*time.Second, "the dead letter", func(r []*kgo.Record) bool { return len(r) >= 1 })[0]
	stopClean(t, p, "the relay")
	if c := testenv.Header(letter, "dlq-class"); c != "bad-row" {
		t.Errorf("the letter's dlq-class is %q, want bad-row (headers %v)", c, letter.Headers)
	}
	if out, code := dlCLI(t, e.Bin, env, "list"); code != 0 || lineWith(out, "ORDER_42_CREATED", "bad row") == "" {
		t.Errorf("list: exit %d, want the letter listed as a bad row", code)
	}
	out, code := dlCLI(t, e.Bin, env, "replay", "--all")
	if code != 1 || !strings.Contains(out, "replayed 0, refused 1 (bad row: 1)") {
		t.Errorf("replay --all: exit %d, want the bad row refused", code)
	}
	if n := testenv.EndOffset(t, f.Topic); n != 0 {
		t.Fatalf("replay published %d record(s) of a bad row to %s (a null value is a tombstone on a compacted topic)", n, f.Topic)
	}
}

// A dead-letter table made by an older version (no class column) and a letter it holds
// without a class (no dlq-class header): `dead-letters` adds the column and reads the old row,
// and replay refuses the letter, which may be a bad row, unless --replay-unclassified says the
// operator checked it.
func TestDeadLettersOlderTableKeepsItsLettersAndRefusesUnclassified(t *testing.T) {
	t.Parallel()
	f, bin, table, env := tableLetters(t, true)
	ctx := context.Background()
	hdrs := `{"outbox-id": "7", "outbox-table": "public.orders", "aggregate-id": "k7", "cdc-lsn": "0/16B3748",
		"dlq-error": "MESSAGE_TOO_LARGE: x", "dlq-original-topic": "` + f.Topic + `"}`
	if _, err := f.Pool.Exec(ctx, `INSERT INTO `+table+` (slot, outbox_id, topic, key, value, headers, error, lsn)
		VALUES ('s1', '7', $1, 'k7', '{"v": 7}', $2::jsonb, 'MESSAGE_TOO_LARGE: x; dead-letter topic d refused it too: MESSAGE_TOO_LARGE', '0/16B3748')`,
		f.Topic, hdrs); err != nil {
		t.Fatal(err)
	}
	if out, code := dlCLI(t, bin, env, "list"); code != 0 || lineWith(out, " 7 ", "unclassified", f.Topic) == "" {
		t.Errorf("list: exit %d, want the old letter listed as unclassified", code)
	}
	out, code := dlCLI(t, bin, env, "replay", "--all")
	if code != 1 || !strings.Contains(out, "refused 1 (unclassified: 1)") || !strings.Contains(out, "--replay-unclassified") {
		t.Errorf("replay --all: exit %d, want the unclassified letter refused with the way to replay it", code)
	}
	if n := testenv.EndOffset(t, f.Topic); n != 0 {
		t.Fatalf("%d records on %s after a refused replay", n, f.Topic)
	}
	out, code = dlCLI(t, bin, env, "replay", "--all", "--replay-unclassified")
	if code != 0 || !strings.Contains(out, "replayed 1, refused 0") {
		t.Errorf("replay --all --replay-unclassified: exit %d", code)
	}
	if n := testenv.EndOffset(t, f.Topic); n != 1 {
		t.Errorf("%d records on %s after the replay, want 1", n, f.Topic)
	}
}

// parkLetter writes a dead letter onto dlq as the relay parks one: key k, value, the outbox
// id and cdc-lsn, the class, the original topic.
func parkLetter(t *testing.T, dlq, outboxID, lsn, value, class, orig string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := &kgo.Record{Topic: dlq, Key: []byte("k"), Value: []byte(value), Headers: []kgo.RecordHeader{
		{Key: "outbox-id", Value: []byte(outboxID)}, {Key: "outbox-table", Value: []byte("public.orders")},
		{Key: "cdc-lsn", Value: []byte(lsn)}, {Key: "dlq-error", Value: []byte("refused: " + class)},
		{Key: "dlq-class", Value: []byte(class)}, {Key: "dlq-original-topic", Value: []byte(orig)},
	}}
	if err := testenv.Kafka(t).ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("park a letter on %s: %v", dlq, err)
	}
}

// Marks of the dead-letter topic were keyed by (topic, partition, offset): after the topic
// was deleted and re-created, a new letter at offset 0 inherited the discarded mark of the
// old one and `list` said "no dead letters waiting". A mark now names the topic's ID and the
// record's timestamp too.
func TestDeadLetterMarksDoNotPassToARecreatedTopic(t *testing.T) {
	t.Parallel()
	f, bin, env := topicLetters(t)
	parkLetter(t, f.DLQ, "1", "0/16B3748", `{"n": 1}`, "bad-row", f.Topic)
	dlMust(t, bin, env, "discarded 1", "discard", "--all")
	adm := kadm.NewClient(testenv.Kafka(t))
	ctx := context.Background()
	if _, err := adm.DeleteTopics(ctx, f.DLQ); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the dead-letter topic re-created", func() bool {
		_, err := adm.CreateTopic(ctx, 1, 1, nil, f.DLQ)
		return err == nil
	})
	parkLetter(t, f.DLQ, "2", "0/16B4000", `{"n": 2}`, "bad-row", f.Topic)
	out, code := dlCLI(t, bin, env, "list")
	if code != 0 || lineWith(out, " 2 ", "bad row", "pending") == "" {
		t.Errorf("list after the topic was re-created: exit %d, want the new letter waiting", code)
	}
}

// A marks table of the version keyed by (topic, partition, offset) is migrated, and its
// marks still apply to the letters they were made for (same outbox id, marked after the letter
// was parked), but not to a letter parked after the mark at the same offset.
func TestDeadLetterMarksOfTheOlderTableStillApply(t *testing.T) {
	t.Parallel()
	f := testenv.NewFixture(t)
	bin := testenv.Binary(t, false)
	ctx := context.Background()
	marks := marksTable(t, f)
	// The DDL of the version before topic_id and letter_time.
	if _, err := f.Pool.Exec(ctx, `CREATE TABLE `+marks+` (
    topic        text         NOT NULL,
    "partition"  integer      NOT NULL,
    "offset"     bigint       NOT NULL,
    outbox_id    text,
    state        text         NOT NULL CHECK (state IN ('replayed', 'discarded')),
    marked_at    timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, "partition", "offset"))`); err != nil {
		t.Fatal(err)
	}
	stale := f.Name + ".stale"
	testenv.CreateTopic(t, stale, 1)
	// The old version's marks: one for a letter of f.DLQ made after it was parked, one at
	// stale's offset 0 made an hour before the letter now there.
	parkLetter(t, f.DLQ, "1", "0/16B3748", `{"n": 1}`, "bad-row", f.Topic)
	parkLetter(t, stale, "1", "0/16B3748", `{"n": 1}`, "bad-row", f.Topic)
	if _, err := f.Pool.Exec(ctx, `INSERT INTO `+marks+` (topic, "partition", "offset", outbox_id, state, marked_at)
		VALUES ($1, 0, 0, '1', 'discarded', now()), ($2, 0, 0, '1', 'discarded', now() - interval '1 hour')`, f.DLQ, stale); err != nil {
		t.Fatal(err)
	}
	if out, code := dlCLI(t, bin, topicEnv(f.DLQ, marks), "list", "--all"); code != 0 || lineWith(out, " 1 ", "discarded") == "" {
		t.Errorf("list --all of %s: exit %d, want its letter discarded by the old mark", f.DLQ, code)
	}
	if out, code := dlCLI(t, bin, topicEnv(stale, marks), "list"); code != 0 || lineWith(out, " 1 ", "pending") == "" {
		t.Errorf("list of %s: exit %d, want its letter waiting: the old mark predates it", stale, code)
	}
}

// Replay sends once the letters of one event, and marks them together. An outbox id reused
// after TRUNCATE ... RESTART IDENTITY is another event (another transaction's cdc-lsn, other
// bytes): it was marked replayed with the first without being sent.
func TestDeadLetterReplaySendsAnEventWithAReusedOutboxID(t *testing.T) {
	t.Parallel()
	f, bin, env := topicLetters(t)
	parkLetter(t, f.DLQ, "1", "0/16B3748", `{"n": "before the truncate"}`, "MESSAGE_TOO_LARGE", f.Topic)
	parkLetter(t, f.DLQ, "1", "0/16B3748", `{"n": "before the truncate"}`, "MESSAGE_TOO_LARGE", f.Topic) // the same event, parked again
	parkLetter(t, f.DLQ, "1", "0/2000000", `{"n": "after the truncate"}`, "MESSAGE_TOO_LARGE", f.Topic)
	out, code := dlCLI(t, bin, env, "replay", "--all")
	if code != 0 || !strings.Contains(out, "replayed 2, refused 0, skipped 1") {
		t.Errorf("replay --all: exit %d, want two events replayed and the duplicate marked with the first", code)
	}
	recs := testenv.Consume(t, f.Topic).WaitFor(t, 30*time.Second, "the replayed records", func(r []*kgo.Record) bool { return len(r) >= 2 })
	if n := testenv.EndOffset(t, f.Topic); n != 2 {
		t.Errorf("%d records on %s, want 2: %v", n, f.Topic, recs)
	}
	wantNoLettersWaiting(t, bin, env, "the replay")
}

// An event the relay parks again after a restart replayed its transaction (same cdc-lsn, key
// and value, a new letter) once an earlier letter of it was replayed: replay marks the new
// letter replayed and does not send the event a second time.
func TestDeadLetterReplayDoesNotSendAReplayedEventAgain(t *testing.T) {
	t.Parallel()
	f, bin, env := topicLetters(t)
	parkLetter(t, f.DLQ, "1", "0/16B3748", `{"n": 1}`, "MESSAGE_TOO_LARGE", f.Topic)
	dlMust(t, bin, env, "replayed 1, refused 0, skipped 0", "replay", "--all")
	parkLetter(t, f.DLQ, "1", "0/16B3748", `{"n": 1}`, "MESSAGE_TOO_LARGE", f.Topic) // parked again by a restarted relay
	if out, code := dlCLI(t, bin, env, "replay", "--all", "--dry-run"); code != 0 || !strings.Contains(out, "would skip 0:1") {
		t.Errorf("replay --dry-run: exit %d, want the new letter skipped as the same event", code)
	}
	out, code := dlCLI(t, bin, env, "replay", "--all")
	if code != 0 || !strings.Contains(out, "replayed 0, refused 0, skipped 2") {
		t.Errorf("second replay: exit %d, want the old letter and the new one of the same event skipped", code)
	}
	if n := testenv.EndOffset(t, f.Topic); n != 1 {
		t.Errorf("%d records on %s, want the event once", n, f.Topic)
	}
	wantNoLettersWaiting(t, bin, env, "the replays")
}

// The relay parks into a dead-letter table made by a version before the class column (a role
// without ownership cannot add it), with the class in the headers column; `dead-letters`
// migrates the table and reads the class from there, and a relay started after the migration
// writes the class column too.
func TestRelayParksIntoAnOlderDeadLetterTable(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	f := e.F
	ctx := context.Background()
	table := deadLetterTable(t, f, true)
	small, smallDLQ := f.LimitedTopic(t, "small", "2048"), f.LimitedTopic(t, "smalldlq", "2048") // both refuse a 4 KB record
	big := testenv.Row{Key: "big", Topic: small, Payload: `{"pad": "` + strings.Repeat("x", 4096) + `"}`}
	parked := func(n int) {
		t.Helper()
		testenv.Eventually(t, 90*time.Second, fmt.Sprintf("%d letter(s) in %s", n, table), func() bool {
			var got int
			_ = f.Pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&got)
			return got >= n
		})
	}
	run := func() *testenv.Proc {
		return e.Start(t, nil, "--dlq-topic", smallDLQ, "--dead-letter-table", table)
	}

	p := run()
	first := f.Insert(t, false, big)[0]
	parked(1)
	stopClean(t, p, "the relay")
	var hclass string
	if err := f.Pool.QueryRow(ctx, `SELECT coalesce(headers->>'dlq-class', '') FROM `+table+` WHERE outbox_id = $1`, strconv.FormatInt(first, 10)).Scan(&hclass); err != nil || hclass != "MESSAGE_TOO_LARGE" {
		t.Errorf("the letter in the older table: dlq-class header %q (%v), want MESSAGE_TOO_LARGE", hclass, err)
	}
	env := tableEnv(table)
	if out, code := dlCLI(t, e.Bin, env, "list"); code != 0 || lineWith(out, "MESSAGE_TOO_LARGE", strconv.FormatInt(first, 10)) == "" {
		t.Errorf("list: exit %d, want the letter listed as MESSAGE_TOO_LARGE", code)
	}

	p = run()
	second := f.Insert(t, false, big)[0]
	parked(2)
	stopClean(t, p, "the relay")
	var class *string
	if err := f.Pool.QueryRow(ctx, `SELECT class FROM `+table+` WHERE outbox_id = $1`, strconv.FormatInt(second, 10)).Scan(&class); err != nil || class == nil || *class != "MESSAGE_TOO_LARGE" {
		t.Errorf("the letter parked after the migration: class %v (%v), want MESSAGE_TOO_LARGE", class, err)
	}
}

// deadLetterTable creates a dead-letter table of the test's own, dropped when the test ends,
// and returns its name. preClass leaves out the class column, as the DDL of the version before
// it (an older relay's) did.
func deadLetterTable(t *testing.T, f *testenv.Fixture, preClass bool) string {
	t.Helper()
	table := "public." + f.Name + "_dl"
	ddl, err := deadletters.TableDDL(table)
	if err != nil {
		t.Fatal(err)
	}
	if preClass {
		const class = "    class       text,\n"
		if !strings.Contains(ddl, class) {
			t.Fatalf("the dead-letter table's DDL has no class column to leave out:\n%s", ddl)
		}
		ddl = strings.Replace(strings.Replace(ddl, class, "", 1), "CREATE TABLE IF NOT EXISTS", "CREATE TABLE", 1)
	}
	if _, err := f.Pool.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })
	return table
}
