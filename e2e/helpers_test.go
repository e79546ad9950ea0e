package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// relayEnv is one test's relay: its fixture, binary and environment.
type relayEnv struct {
	f   *testenv.Fixture
	bin string
	env []string
}

// newRelayEnv makes a fixture and creates its slot and publication with the CLI.
func newRelayEnv(t *testing.T, race bool) *relayEnv {
	t.Helper()
	f := testenv.NewFixture(t)
	e := &relayEnv{f: f, bin: testenv.Binary(t, race), env: []string{
		"CDC_RELAY_SLOT=" + f.Slot, "CDC_RELAY_PUBLICATION=" + f.Publication,
	}}
	out, errOut, code := testenv.Run(t, 30*time.Second, e.bin, e.env, "slot", "create", "--table", f.Table)
	if code != 0 {
		t.Fatalf("slot create: exit %d\n%s%s", code, out, errOut)
	}
	return e
}

// start runs `cdc-relay run` with a 1s status interval and the fixture's DLQ topic.
func (e *relayEnv) start(t *testing.T, extraEnv []string, args ...string) *testenv.Proc {
	t.Helper()
	a := append([]string{"run", "--dlq-topic", e.f.DLQ, "--status-interval", "1s"}, args...)
	return testenv.Start(t, e.bin, append(append([]string{}, e.env...), extraEnv...), a...)
}

// ids maps outbox ids (as text) to how many records carry them.
func ids(recs []*kgo.Record) map[string]int {
	m := make(map[string]int, len(recs))
	for _, r := range recs {
		m[testenv.Header(r, "outbox-id")]++
	}
	return m
}

// hasAll reports whether every id in want has arrived.
func hasAll(want []int64) func([]*kgo.Record) bool {
	return func(recs []*kgo.Record) bool {
		got := ids(recs)
		for _, id := range want {
			if got[strconv.FormatInt(id, 10)] == 0 {
				return false
			}
		}
		return true
	}
}

func lsnOf(t *testing.T, r *kgo.Record) pglogrepl.LSN {
	t.Helper()
	lsn, err := pglogrepl.ParseLSN(testenv.Header(r, "cdc-lsn"))
	if err != nil {
		t.Fatalf("record %s: cdc-lsn %q: %v", testenv.Header(r, "outbox-id"), testenv.Header(r, "cdc-lsn"), err)
	}
	return lsn
}

func lsnLess(t *testing.T, a, b string) bool {
	t.Helper()
	x, err1 := pglogrepl.ParseLSN(a)
	y, err2 := pglogrepl.ParseLSN(b)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad LSNs %q %q", a, b)
	}
	return x < y
}

// settle waits until the relay has confirmed past upTo (so everything committed before it is in
// Kafka, replays included) and the consumer has read every record the topic holds, and returns
// them. Without it a test can judge duplicates before a restarted relay has replayed anything.
func (e *relayEnv) settle(t *testing.T, cons *testenv.Consumer, upTo pglogrepl.LSN) []*kgo.Record {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "the slot to confirm past "+upTo.String(), func() bool { return e.f.SlotConfirmed(t) >= upTo })
	end := testenv.EndOffset(t, e.f.Topic)
	return cons.WaitFor(t, 60*time.Second, "every record on the topic", func(r []*kgo.Record) bool { return int64(len(r)) >= end })
}
