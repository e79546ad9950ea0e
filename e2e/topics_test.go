package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// insertRow writes one outbox row for topic and returns its id.
func insertRow(t *testing.T, f *testenv.Fixture, key, topic string) int64 {
	t.Helper()
	var id int64
	if err := f.Pool.QueryRow(context.Background(), `INSERT INTO `+f.Table+` (aggregate_id, topic, payload) VALUES ($1, $2, '{}') RETURNING id`,
		key, topic).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A row for a topic that does not exist is dead-lettered at once with an error that says the
// topic does not exist and what to do, and the stream goes on. It pins a relay that took a
// missing topic for an outage: "Kafka is not acknowledging" for seconds per record while it
// held its position, then a warning to grant DescribeConfigs for a topic that was merely
// missing, and a dead letter whose error said UNKNOWN_TOPIC_OR_PARTITION alone.
func TestRowForAMissingTopicIsDeadLetteredAtOnceAndSaysSo(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	missing := f.Name + ".missing"
	adm := kadm.NewClient(testenv.Kafka(t))
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), missing) })
	p := e.Start(t, nil, "--metrics-addr", "")
	cons := testenv.Consume(t, f.Topic)
	dlq := testenv.Consume(t, f.DLQ)
	lost := insertRow(t, f, "k", missing)
	insertRow(t, f, "k2", f.Topic)

	cons.WaitFor(t, 60*time.Second, "the row for the existing topic", func(r []*kgo.Record) bool { return len(r) == 1 })
	recs := dlq.WaitFor(t, 60*time.Second, "the dead letter", func(r []*kgo.Record) bool { return len(r) == 1 })
	r := recs[0]
	if got := testenv.Header(r, "outbox-id"); got != strconv.FormatInt(lost, 10) {
		t.Errorf("dead letter outbox-id %s, want %d", got, lost)
	}
	if msg := testenv.Header(r, "dlq-error"); !strings.Contains(msg, "does not exist in Kafka") || !strings.Contains(msg, "--create-topics") {
		t.Errorf("dlq-error %q does not say that the topic does not exist and what to do", msg)
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d\n%s", code, p.Output())
	}
	out := p.Output()
	for _, bad := range []string{"not acknowledging", "grant DescribeConfigs", "records still unacknowledged", "final standby status not sent"} {
		if strings.Contains(out, bad) {
			t.Errorf("the log has %q: a missing topic is not an outage nor a permission:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "topic does not exist in Kafka") || !strings.Contains(out, missing) {
		t.Errorf("the log does not say that topic %s does not exist:\n%s", missing, out)
	}
}

// --create-topics creates the dead-letter topic at start and a row's topic before its first
// record, with --topic-partitions; without it a dead-letter topic that does not exist stops the
// start with exit 2 (it would refuse every dead letter), naming the flag and what to do.
func TestDeadLetterTopicMustExistOrBeCreated(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	ctx := context.Background()
	adm := kadm.NewClient(testenv.Kafka(t))
	noDLQ, newDLQ, newTopic := f.Name+".nodlq", f.Name+".newdlq", f.Name+".created"
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), noDLQ, newDLQ, newTopic) })

	_, errOut, code := testenv.Run(t, 60*time.Second, e.Bin, e.Env, "run", "--dlq-topic", noDLQ, "--metrics-addr", "")
	if code != 2 {
		t.Errorf("a missing dead-letter topic: exit %d, want 2\n%s", code, errOut)
	}
	for _, want := range []string{"--dlq-topic", noDLQ, "does not exist in Kafka", "--create-topics", "kafka-topics.sh"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("a missing dead-letter topic: the error lacks %q:\n%s", want, errOut)
		}
	}
	if td, err := adm.ListTopics(ctx, noDLQ); err != nil || td[noDLQ].Err == nil {
		t.Errorf("the relay created %s without --create-topics (%v)", noDLQ, err)
	}
	// A creation Kafka refuses (5 replicas on one broker) is said, with the broker's reason.
	_, errOut, code = testenv.Run(t, 60*time.Second, e.Bin, e.Env, "run", "--dlq-topic", noDLQ, "--metrics-addr", "",
		"--create-topics", "--topic-replication-factor", "5")
	if code != 2 || !strings.Contains(errOut, "--create-topics could not create it") || !strings.Contains(errOut, "INVALID_REPLICATION_FACTOR") {
		t.Errorf("a dead-letter topic Kafka refuses to create: exit %d, want 2 saying why\n%s", code, errOut)
	}

	p := testenv.Start(t, e.Bin, e.Env, "run", "--dlq-topic", newDLQ, "--status-interval", "1s", "--metrics-addr", "",
		"--create-topics", "--topic-partitions", "2")
	cons := testenv.Consume(t, newTopic)
	id := insertRow(t, f, "k", newTopic)
	recs := cons.WaitFor(t, 60*time.Second, "the row on the topic the relay created", func(r []*kgo.Record) bool { return len(r) == 1 })
	if got := testenv.Header(recs[0], "outbox-id"); got != strconv.FormatInt(id, 10) {
		t.Errorf("outbox-id %s, want %d", got, id)
	}
	td, err := adm.ListTopics(ctx, newDLQ, newTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{newDLQ, newTopic} {
		if d := td[topic]; d.Err != nil || len(d.Partitions) != 2 {
			t.Errorf("topic %s: %d partitions (%v), want 2", topic, len(d.Partitions), d.Err)
		}
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d\n%s", code, p.Output())
	}
	if out := p.Output(); strings.Contains(out, "level=ERROR") || !strings.Contains(out, "created topic") {
		t.Errorf("the log:\n%s", out)
	}
}
