package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// dlCLI runs `cdc-relay dead-letters ...` and returns its stdout+stderr and exit code.
func dlCLI(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := testenv.Run(t, 90*time.Second, bin, env, append([]string{"dead-letters"}, args...)...)
	t.Logf("dead-letters %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	return out + errOut, code
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

// Letters the relay parked on the dead-letter topic (a record too large for its topic, one for
// a topic that does not exist) are listed, refused while their cause holds, replayed once it is
// fixed (original key, value and headers plus cdc-replayed-at, without dlq-*), not sent again by
// a second replay; a letter that no replay can fix is discarded.
func TestDeadLettersFromTopicListReplayDiscard(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	f := e.F
	ctx := context.Background()
	small := f.Name + ".small"
	later := f.Name + ".later" // created only once the letter is to be replayed
	testenv.CreateTopicWithConfig(t, small, 1, map[string]string{"max.message.bytes": "2048"})
	adm := kadm.NewClient(testenv.Kafka(t))
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), later) })
	marks := "public." + f.Name + "_marks"
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+marks) })

	p := e.Start(t, nil)
	dlq := testenv.Consume(t, f.DLQ)
	ids := f.Insert(t, false,
		testenv.Row{Key: "k2", Topic: small, Payload: `{"pad": "` + strings.Repeat("x", 4096) + `"}`, Headers: `{"correlation-id": "c2"}`})
	ids = append(ids, f.Insert(t, false, testenv.Row{Key: "k3", Topic: later, Payload: `{"n": 3}`, EventType: "created", Headers: `{"correlation-id": "c3"}`})...)
	ids = append(ids, f.Insert(t, false, testenv.Row{Key: "k4", Topic: "no spaces allowed!", Payload: `{"n": 4}`})...)
	tooLarge, missing, badName := strconv.FormatInt(ids[0], 10), strconv.FormatInt(ids[1], 10), strconv.FormatInt(ids[2], 10)
	dlq.WaitFor(t, 120*time.Second, "three dead letters", func(r []*kgo.Record) bool { return len(r) >= 3 })
	if code := p.Stop(t); code != 0 {
		t.Fatalf("relay exit %d:\n%s", code, p.Output())
	}

	env := append(append([]string{}, e.Env...), "CDC_RELAY_DLQ_TOPIC="+f.DLQ, "CDC_RELAY_MARKS_TABLE="+marks)
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
	big := "1048576"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &big}}, small); err != nil {
		t.Fatal(err)
	}
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
	f := testenv.NewFixture(t)
	bin := testenv.Binary(t, false)
	ctx := context.Background()
	table := "public." + f.Name + "_dl"
	ddl, err := slotstore.DeadLetterTableDDL(table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })
	later := f.Name + ".later"
	adm := kadm.NewClient(testenv.Kafka(t))
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), later) })
	insert := func(id, topic, key string) {
		t.Helper()
		hdrs := `{"outbox-id": "` + id + `", "outbox-table": "public.orders", "aggregate-id": "` + key + `", "cdc-lsn": "0/16B3748",
			"correlation-id": "c` + id + `", "dlq-error": "UNKNOWN_TOPIC_OR_PARTITION: x", "dlq-original-topic": "` + topic + `"}`
		_, err := f.Pool.Exec(ctx, `INSERT INTO `+table+` (slot, outbox_id, topic, key, value, headers, error, lsn)
			VALUES ('s1', $1, $2, $3, $4, $5::jsonb, 'UNKNOWN_TOPIC_OR_PARTITION: x; dead-letter topic d refused it too: TOPIC_AUTHORIZATION_FAILED', '0/16B3748')`,
			id, topic, []byte(key), []byte(`{"v": `+id+`}`), hdrs)
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("7", later, "k7")
	insert("8", "gone-for-good", "k8")
	env := []string{"CDC_RELAY_FROM=table", "CDC_RELAY_DEAD_LETTER_TABLE=" + table}
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
	err = f.Pool.QueryRow(ctx, `SELECT count(replayed_at), count(discarded_at) FROM `+pgx.Identifier{"public", f.Name + "_dl"}.Sanitize()).Scan(&replayed, &discarded)
	if err != nil || replayed != 1 || discarded != 1 {
		t.Errorf("replayed_at %d, discarded_at %d (%v): want 1 and 1", replayed, discarded, err)
	}
	if out, _ := dlCLI(t, bin, env, "list"); !strings.Contains(out, "no dead letters waiting") {
		t.Errorf("list after replay and discard shows letters")
	}
}
