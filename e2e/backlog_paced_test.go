package e2e

import (
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// A backlog written while the relay is stopped is read at a paced rate, PostgreSQL being on
// the same host here (DESIGN.md, "Reading a backlog"): every row arrives, the paced-bytes
// counter shows the pacer ran, and a row written once the backlog is drained still arrives.
func TestBacklogFromTheSameHostIsReadPaced(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	var ids []int64
	for range 100 {
		ids = append(ids, insertAged(t, e.F, 200, 0, false)...)
	}
	p := e.Start(t, nil, "--metrics-addr", "127.0.0.1:0")
	addr := metricsAddr(t, p)
	cons := testenv.Consume(t, e.F.Topic)
	cons.WaitFor(t, 120*time.Second, "the 20,000-row backlog", hasAll(ids))
	if got := scrape(t, addr)["cdc_relay_replication_paced_bytes_total"]; got < 1<<20 {
		t.Errorf("replication_paced_bytes_total = %v after a 20,000-row backlog, want at least 1 MiB", got)
	}
	late := insertAged(t, e.F, 1, 0, false)
	cons.WaitFor(t, 30*time.Second, "a row written after the backlog", hasAll(late))
}
