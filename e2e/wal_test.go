package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Heavy writes to another table, no outbox rows: the slot's confirmed position follows the
// server's WAL, so a quiet outbox does not retain the WAL of other tables' traffic.
func TestQuietOutboxSlotFollowsOtherTablesWAL(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	other := e.F.Table + "_other"
	if _, err := e.F.Pool.Exec(context.Background(), `CREATE TABLE `+other+` (id bigserial primary key, filler text)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.F.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+other) })
	p := e.Start(t, nil)
	testenv.Eventually(t, 30*time.Second, "the relay to stream", func() bool { return strings.Contains(p.Output(), "streaming") })

	start := e.F.SlotConfirmed(t)
	for i := 0; i < 5; i++ {
		if _, err := e.F.Pool.Exec(context.Background(),
			`INSERT INTO `+other+` (filler) SELECT repeat('x', 200) FROM generate_series(1, 20000)`); err != nil {
			t.Fatal(err)
		}
	}
	target := e.F.CurrentWAL(t)
	if target-start < 4<<20 {
		t.Fatalf("wrote only %d bytes of WAL", target-start)
	}
	var now pglogrepl.LSN
	testenv.Eventually(t, 60*time.Second, "confirmed_flush_lsn to pass the other table's WAL", func() bool {
		now = e.F.SlotConfirmed(t)
		return now >= target
	})
	t.Logf("slot advanced %d bytes (%s -> %s) without a single outbox row", now-start, start, now)
}
