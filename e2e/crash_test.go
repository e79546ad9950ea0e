package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// kill -9 after Kafka acknowledged a transaction and before the position reached Postgres:
// the restart replays from the slot. Nothing is lost, and every duplicate belongs to a
// transaction at or after the confirmed position (the replay window).
func TestKill9AfterKafkaAckReplaysWithoutLoss(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	all := insertInterleavedTxns(t, e.F)
	before := e.F.SlotConfirmed(t)
	written := e.F.CurrentWAL(t)

	// The hook kills the process with SIGKILL when the 5th acknowledged position is about to
	// be confirmed. A long status interval keeps earlier positions from reaching Postgres.
	p := e.Start(t, []string{"CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=5"}, "--status-interval", "1h")
	p.WaitKilled(t, 60*time.Second)
	confirmed := e.F.SlotConfirmed(t)
	if confirmed >= e.F.CurrentWAL(t) {
		t.Fatalf("the slot confirmed %s, everything: the crash came too late to test a replay", confirmed)
	}
	cons := testenv.Consume(t, e.F.Topic)
	// Kafka already holds the first acknowledged transactions.
	cons.WaitFor(t, 30*time.Second, "records acknowledged before the crash", func(r []*kgo.Record) bool { return len(r) >= 5 })

	e.Start(t, nil)
	recs := e.Settle(t, cons, written)
	got := ids(recs)
	dups := 0
	for _, r := range recs {
		id := testenv.Header(r, "outbox-id")
		if got[id] > 1 {
			dups++
			if lsn := lsnOf(t, r); lsn < confirmed {
				t.Errorf("outbox id %s (commit %s) duplicated although the slot had confirmed %s before the crash", id, lsn, confirmed)
			}
		}
	}
	if dups == 0 {
		t.Errorf("no duplicates: the crash did not fall between Kafka's acknowledgement and the confirmation (slot at %s, was %s)", confirmed, before)
	}
	t.Logf("%d rows, %d records, %d duplicate records, slot confirmed %s at the crash", len(all), len(recs), dups, confirmed)
	for _, id := range all {
		if got[strconv.FormatInt(id, 10)] == 0 {
			t.Errorf("outbox id %d lost", id)
		}
	}
}
