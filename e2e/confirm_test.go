package e2e

import (
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// The replay window: the position Kafka acknowledged reaches PostgreSQL within
// --confirm-delay (100 ms), not at the next status update. With the heartbeat an hour away,
// the slot must still move past a delivered row within seconds; before, a kill -9 replayed
// everything since the last status update (10 s by default).
func TestSlotConfirmsSoonAfterKafkaAcknowledged(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	cons := testenv.Consume(t, e.F.Topic)
	e.Start(t, nil, "--status-interval", "1h")
	for i := range 3 {
		ids := e.F.Insert(t, false, testenv.Row{Key: "k", Payload: `{"n": 1}`})
		end := e.F.CurrentWAL(t)
		cons.WaitFor(t, 60*time.Second, "the row on Kafka", hasAll(ids))
		acked := time.Now()
		testenv.Eventually(t, 10*time.Second, "the slot to confirm past the delivered row", func() bool { return e.F.SlotConfirmed(t) >= end })
		t.Logf("row %d: slot confirmed %s after the record was read", i+1, time.Since(acked).Round(time.Millisecond))
	}
}
