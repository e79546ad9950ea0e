package faults

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// A topic the relay may not write (a DENY WRITE ACL for its principal): the record is
// dead-lettered with TOPIC_AUTHORIZATION_FAILED and the stream goes on. It needs a broker
// with an authorizer; the faults pair is started with one (see `make faults`):
//
//	CDC_RELAY_DEV_KAFKA_EXTRA_CONF='authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
//	allow.everyone.if.no.acl.found=true'
func TestTopicNotAuthorizedIsDeadLettered(t *testing.T) {
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	ctx := context.Background()
	adm := kadm.NewClient(testenv.Kafka(t))
	if _, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Operations(kadm.OpAny)); errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("the broker at CDC_RELAY_BROKERS has no authorizer, so topic authorization cannot be tested: "+
			"start it with CDC_RELAY_DEV_KAFKA_EXTRA_CONF=%q (make faults does)",
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nallow.everyone.if.no.acl.found=true")
	}
	denied := f.Name + ".denied"
	testenv.CreateTopic(t, denied, 1)
	acl := kadm.NewACLs().Topics(denied).ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpWrite)
	res, err := adm.CreateACLs(ctx, acl)
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("create the DENY WRITE ACL on %s: %v", denied, err)
	}
	t.Cleanup(func() {
		del := kadm.NewACLs().Topics(denied).ResourcePatternType(kadm.ACLPatternLiteral).
			Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpWrite)
		_, _ = adm.DeleteACLs(context.Background(), del)
	})

	p := e.Start(t, nil)
	cons := testenv.Consume(t, f.Topic)
	dlq := testenv.Consume(t, f.DLQ)
	ins := func(key, topic string) int64 {
		var id int64
		if err := f.Pool.QueryRow(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload) VALUES ($1, $2, '{"x": 1}') RETURNING id`, key, topic).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	good1 := ins("k1", f.Topic)
	bad := ins("k2", denied)
	good2 := ins("k1", f.Topic)

	recs := dlq.WaitFor(t, 60*time.Second, "the denied record on the dead-letter topic", func(r []*kgo.Record) bool { return len(r) >= 1 })
	r := recs[0]
	if testenv.Header(r, "outbox-id") != strconv.FormatInt(bad, 10) || string(r.Key) != "k2" ||
		!strings.Contains(testenv.Header(r, "dlq-error"), "TOPIC_AUTHORIZATION_FAILED") || testenv.Header(r, "dlq-original-topic") != denied {
		t.Errorf("dead letter: key %q headers %v", r.Key, r.Headers)
	}
	cons.WaitFor(t, 60*time.Second, "the good rows around it", testenv.HasAll([]int64{good1, good2}))
	if !strings.Contains(p.Output(), "Kafka rejected a record for good: dead-lettering it") {
		t.Errorf("the rejection was not logged")
	}
}
