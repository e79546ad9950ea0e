package e2e

import (
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// A backlog written while the relay is stopped is drained in batches with SO_RCVLOWAT raised
// (DESIGN.md, "Reading a backlog"): every row arrives, and a row written once the backlog is
// drained still arrives (the stream left the drain mode).
func TestBacklogIsDrainedAndALaterRowArrives(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	var ids []int64
	for range 100 {
		ids = append(ids, insertAged(t, e.F, 200, 0, false)...)
	}
	e.Start(t, nil, "--metrics-addr", "127.0.0.1:0")
	cons := testenv.Consume(t, e.F.Topic)
	cons.WaitFor(t, 120*time.Second, "the 20,000-row backlog", hasAll(ids))
	late := insertAged(t, e.F, 1, 0, false)
	cons.WaitFor(t, 30*time.Second, "a row written after the backlog", hasAll(late))
}
