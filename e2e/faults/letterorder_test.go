package faults

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

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
