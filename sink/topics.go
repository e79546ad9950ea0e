package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicCreation is how the sink creates topics that do not exist (Config.CreateTopics), as
// Debezium's topic.creation.default.* does.
type TopicCreation struct {
	// Partitions of a created topic; -1 (or 0) takes the broker's num.partitions.
	Partitions int32
	// ReplicationFactor of a created topic; -1 (or 0) takes the broker's
	// default.replication.factor.
	ReplicationFactor int16
}

// Validate reports counts Kafka would refuse.
func (t TopicCreation) Validate() error {
	if t.Partitions < -1 {
		return fmt.Errorf("sink: topic partitions %d: use -1 (the broker's default) or a positive count", t.Partitions)
	}
	if t.ReplicationFactor < -1 {
		return fmt.Errorf("sink: topic replication factor %d: use -1 (the broker's default) or a positive count", t.ReplicationFactor)
	}
	return nil
}

// TopicMissingError is the failure of a record whose topic does not exist in Kafka (and the
// sink was not asked to create topics), and Ping's error for a topic of Config.Topics that does
// not exist. It unwraps to kerr.UnknownTopicOrPartition, so Rejected reports true.
type TopicMissingError struct {
	Topic string
}

// Error starts with Kafka's name for the error, UNKNOWN_TOPIC_OR_PARTITION, as a refusal from the
// broker does: `dead-letters list` and `replay` class a letter by it.
func (e *TopicMissingError) Error() string {
	return fmt.Sprintf("%s: topic %q does not exist in Kafka: create it (kafka-topics.sh --create --topic %s), "+
		"or let the relay create missing topics (--create-topics)", kerr.UnknownTopicOrPartition.Message, e.Topic, e.Topic)
}

func (e *TopicMissingError) Unwrap() error { return kerr.UnknownTopicOrPartition }

// missingRecheck is how long the sink trusts an answer that a topic does not exist before it
// asks the cluster again, so that a topic created while the relay runs is used from then on. A
// missing topic is no outage to retry (franz-go would, seconds per record, while the position
// holds): the sink asks the cluster's metadata before a topic's first record (limits.go) and
// fails the records of one Kafka does not know at once with a *TopicMissingError (Rejected:
// dead-lettered), unless Config.CreateTopics has it created.
// (DESIGN.md, "A missing topic is not an outage")
const missingRecheck = 5 * time.Second

// topicFacts is what one metadata request says about a topic.
type topicFacts struct {
	missing     bool
	replication int // the smallest replica count of its partitions
	brokers     int // brokers in the cluster
}

// topicMetadata asks the cluster whether topic exists and how it is replicated, bypassing
// the client's metadata cache (which keeps an answer for MetadataMinAge, 5 s: a topic just
// created would look missing). An error means the cluster did not answer, or the principal may
// not describe the topic.
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (topicFacts, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return topicFacts{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		f := topicFacts{brokers: len(resp.Brokers)}
		if err := kerr.ErrorForCode(t.ErrorCode); errors.Is(err, kerr.UnknownTopicOrPartition) {
			f.missing = true
			return f, nil
		} else if err != nil {
			return topicFacts{}, err
		}
		for _, p := range t.Partitions {
			if f.replication == 0 || len(p.Replicas) < f.replication {
				f.replication = len(p.Replicas)
			}
		}
		return f, nil
	}
	return topicFacts{}, errors.New("the metadata answer does not name the topic")
}

// createTopic creates topic as c says; a topic that another client created meanwhile is fine
// (created false).
func createTopic(ctx context.Context, adm *kadm.Client, c TopicCreation, topic string) (created bool, err error) {
	p, rf := c.Partitions, c.ReplicationFactor
	if p == 0 {
		p = -1
	}
	if rf == 0 {
		rf = -1
	}
	_, err = adm.CreateTopic(ctx, p, rf, nil, topic)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return false, nil
	}
	return err == nil, err
}

// durabilityWarning says why an acknowledged record of the topic could be lost with one
// broker, on a cluster of several: a replication factor of 1, or min.insync.replicas 1 (acks=all
// then waits for the leader alone). "" when neither holds, or the cluster has one broker (where
// nothing better is possible and the operator chose it).
func durabilityWarning(f topicFacts, minISR string) string {
	if f.brokers <= 1 {
		return ""
	}
	switch {
	case f.replication == 1:
		return "the topic has one replica on a cluster of " + strconv.Itoa(f.brokers) +
			" brokers: a record Kafka acknowledged is lost if that broker's disk is; recreate the topic with a replication factor of 3 (and min.insync.replicas=2)"
	case minISR == "1":
		return "the topic's min.insync.replicas is 1 on a cluster of " + strconv.Itoa(f.brokers) +
			" brokers: acks=all then waits for the leader alone, and a record Kafka acknowledged is lost if the leader fails before a follower copied it; " +
			"set min.insync.replicas=2 (kafka-configs.sh --alter --entity-type topics --add-config min.insync.replicas=2)"
	}
	return ""
}

// ValidTopicName reports a name Kafka refuses as a topic name: empty, longer than 249
// characters, "." or "..", or with a character other than ASCII letters, digits, '.', '_'
// and '-'.
func ValidTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("a topic name cannot be empty")
	case len(name) > 249:
		return fmt.Errorf("topic name %q is %d characters long: Kafka allows at most 249", name, len(name))
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed by Kafka", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q has %q: Kafka topic names use only ASCII letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return nil
}
