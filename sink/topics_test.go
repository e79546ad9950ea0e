package sink

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/proc"
)

// kfakeSink is a Sink on a kfake cluster of brokers brokers, needing topics (Config.Topics),
// and the buffer it logs to; both end with the test.
func kfakeSink(t *testing.T, brokers int, topics []string) (*Sink, *proc.Buffer) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	log := &proc.Buffer{}
	s, err := New(Config{Brokers: c.ListenAddrs(), Topics: topics, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, log
}

// durabilityLog produces one record to each topic (created with its replication factor and
// min.insync.replicas) on a kfake cluster of brokers brokers, and returns the sink's log.
func durabilityLog(t *testing.T, brokers int, topics map[string][2]int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, log := kfakeSink(t, brokers, nil)
	adm := kadm.NewClient(s.Client())
	for topic, rf := range topics {
		isr := kadm.StringPtr("1")
		if rf[1] > 1 {
			isr = kadm.StringPtr("2")
		}
		if _, err := adm.CreateTopic(ctx, 1, int16(rf[0]), map[string]*string{"min.insync.replicas": isr}, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	for topic := range topics {
		done := make(chan error, 1)
		s.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}, func(_ *kgo.Record, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	return log.String()
}

// An acknowledged record is durable only if a second broker holds it: on a cluster of several
// brokers the relay warns, once per topic, about a topic of one replica or of
// min.insync.replicas 1 (acks=all then waits for the leader alone), and not about a topic
// with replicas and min.insync.replicas 2; on a single broker it never warns.
func TestWarnsWhenAnAcknowledgedRecordCanBeLostWithOneBroker(t *testing.T) {
	out := durabilityLog(t, 3, map[string][2]int{"one": {1, 1}, "isr1": {3, 1}, "safe": {3, 2}})
	for _, want := range []string{`topic=one replication_factor=1`, `topic=isr1 replication_factor=3 min_insync_replicas=1`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "topic=safe") {
		t.Errorf("warned about a topic with 3 replicas and min.insync.replicas 2:\n%s", out)
	}
	if !strings.Contains(out, "one replica on a cluster of 3 brokers") || !strings.Contains(out, "min.insync.replicas is 1 on a cluster of 3 brokers") {
		t.Errorf("the warnings do not say why:\n%s", out)
	}
	if single := durabilityLog(t, 1, map[string][2]int{"one": {1, 1}}); strings.Contains(single, "level=WARN") {
		t.Errorf("warned on a single broker:\n%s", single)
	}
}

// A topic the relay needs (the dead-letter topic, or --topic) that does not exist is Ping's
// error, not a log line promising that its records will be dead-lettered; and a record to it
// later logs that the relay needs it, once, not that it is dead-lettered.
func TestAMissingRequiredTopicIsNotSaidToBeDeadLettered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, log := kfakeSink(t, 1, []string{"cdc-relay.dlq"})
	var missing *TopicMissingError
	if err := s.Ping(ctx); !errors.As(err, &missing) || missing.Topic != "cdc-relay.dlq" {
		t.Fatalf("Ping = %v, want the missing topic cdc-relay.dlq", err)
	}
	if out := log.String(); strings.Contains(out, "cdc-relay.dlq") {
		t.Errorf("Ping logged the topic it returns as its error:\n%s", out)
	}
	for range 2 {
		done := make(chan error, 1)
		s.Produce(ctx, &kgo.Record{Topic: "cdc-relay.dlq", Value: []byte("v")}, func(_ *kgo.Record, err error) { done <- err })
		if err := <-done; !errors.As(err, &missing) {
			t.Fatalf("produce to the missing topic = %v, want TopicMissingError", err)
		}
	}
	out := log.String()
	if strings.Contains(out, "dead-lettered") || strings.Count(out, "the relay needs it") != 1 {
		t.Errorf("want one line saying the relay needs the topic, none saying its records are dead-lettered:\n%s", out)
	}
}
