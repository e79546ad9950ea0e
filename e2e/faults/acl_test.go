package faults

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
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

// A SIGTERM while the relay holds a dead letter nobody takes leaves no later record of its key
// delivered, so the restart delivers the key in commit order. Row 1's topic refuses it (a DENY
// WRITE ACL), the dead-letter topic refuses its letter too and the table refuses it: the letter
// is held. The ACL goes and row 2, of the same key, follows. The relay delivered row 2 at once,
// the stop's shutdown timeout passed with the letter still held, and the restart replayed row 1
// onto the topic, which takes it now: after row 2, with nothing dead-lettered to say why (the
// virtual-time simulation found it, seed 2722 with -sim.held-letters). Row 2 now waits behind
// the letter of its key (DESIGN.md, "A key's later records wait for its dead letter").
func TestStopHoldingALetterKeepsItsKeyInOrderAcrossTheRestart(t *testing.T) {
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	ctx := context.Background()
	adm := kadm.NewClient(testenv.Kafka(t))
	allowTopic := denyWrite(t, adm, f.Topic)
	denyWrite(t, adm, f.DLQ)
	f.RefuseDeadLetters(t)

	p := e.Start(t, nil, "--shutdown-timeout", "2s")
	cons := testenv.Consume(t, f.Topic)
	first := f.Insert(t, false, testenv.Row{Key: "k", Payload: `{"n": 1}`})
	const refused = "cannot park dead letters in PostgreSQL"
	testenv.Eventually(t, 60*time.Second, "the table to refuse the letter of row 1", func() bool { return p.Exited() || strings.Contains(p.Output(), refused) })
	allowTopic()
	// The topic takes records again once the broker's authorizer has dropped the ACL.
	probe := testenv.Kafka(t)
	testenv.Eventually(t, 60*time.Second, "the topic to take records again", func() bool {
		return probe.ProduceSync(ctx, &kgo.Record{Topic: f.Topic, Key: []byte("probe"), Value: []byte(`{}`)}).FirstErr() == nil
	})
	second := f.Insert(t, false, testenv.Row{Key: "k", Payload: `{"n": 2}`})
	const waits = "reading paused: a dead letter of this record's topic and key is not parked yet"
	testenv.Eventually(t, 60*time.Second, "row 2 delivered or waiting behind the letter", func() bool {
		return p.Exited() || strings.Contains(p.Output(), waits) || testenv.HasAll(second)(cons.Records())
	})
	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, p.Output())
	}
	if testenv.HasAll(second)(cons.Records()) {
		t.Errorf("row 2 was delivered while the letter of row 1, of its key, was held, and the stop left that letter unparked")
	}

	// The restart replays row 1 onto the topic, which takes it now, then row 2.
	p = e.Start(t, nil)
	recs := cons.WaitFor(t, 60*time.Second, "rows 1 and 2", testenv.HasAll(append(first, second...)))
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	var order []string
	for _, r := range recs {
		if id := testenv.Header(r, "outbox-id"); string(r.Key) == "k" && !slices.Contains(order, id) {
			order = append(order, id)
		}
	}
	if want := []string{strconv.FormatInt(first[0], 10), strconv.FormatInt(second[0], 10)}; strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("key k's first deliveries are %v, want %v (commit order)", order, want)
	}
}
