package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Records over the broker's limit fail at once and never block Produce, so
// they piled up in the dead-letter queues while the dead-letter topic and table refused them (100
// rows of 2 MB grew the heap by 200 MB in 2 s). Dead letters now count against the producer's
// limits: with --max-buffered-bytes 8 MiB, reading pauses and says why, the relay's peak RSS
// stays far below the 200 MB backlog, and once the table takes letters again every one is parked,
// the rows after them arrive, and the slot moves on.
func TestDeadLettersNobodyTakesPauseReadingInBoundedMemory(t *testing.T) {
	e := testenv.NewRelayEnv(t, false) // no race detector: its shadow memory would blur the RSS
	f := e.F
	ctx := context.Background()
	adm := kadm.NewClient(testenv.Kafka(t))
	denyWrite(t, adm, f.DLQ)
	// The table refuses this slot's letters only (other tests share it) until the check goes.
	dropCheck := f.RefuseDeadLetters(t)

	const rows, size = 100, 2 << 20
	// One key each: a later record of a key waits behind its letter (DESIGN.md, "A key's later
	// records wait"), which would pause reading at the second row before the budget does.
	for i := range rows { // one transaction each, written while the relay is stopped
		if _, err := f.Pool.Exec(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload) VALUES ('big-' || $3::int, $1, to_jsonb(repeat('x', $2::int)))`,
			f.Topic, size, i); err != nil {
			t.Fatal(err)
		}
	}
	after := f.Insert(t, false, testenv.Row{Key: "k", Payload: `{"after": 1}`}, testenv.Row{Key: "k", Payload: `{"after": 2}`})
	end := f.CurrentWAL(t)

	p := e.Start(t, nil, "--max-buffered-bytes", "8388608")
	const paused, refused = "reading paused: dead letters wait", "cannot park dead letters in PostgreSQL"
	// Six refusals take ~8 s of backoff: time enough to read the whole backlog if nothing stops it.
	testenv.Eventually(t, 120*time.Second, "the table to refuse six times", func() bool {
		return p.Exited() || strings.Count(p.Output(), refused) >= 6
	})
	if p.Exited() {
		t.Fatalf("the relay exited")
	}
	peak, err := testenv.RSSPeak(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	var parkedBefore int
	_ = f.Pool.QueryRow(ctx, `SELECT count(*) FROM cdc_relay_dead_letters WHERE slot = $1`, f.Slot).Scan(&parkedBefore)
	t.Logf("peak RSS while paused: %.1f MB (the backlog: %d MB)", float64(peak)/(1<<20), rows*size>>20)
	if peak > 100<<20 {
		t.Errorf("peak RSS %.1f MB while the dead letters had nowhere to go: want well below the %d MB backlog", float64(peak)/(1<<20), rows*size>>20)
	}
	if !strings.Contains(p.Output(), paused) {
		t.Errorf("the relay did not say that reading paused")
	}
	if parkedBefore != 0 {
		t.Fatalf("%d letters parked while the table refused them", parkedBefore)
	}

	dropCheck()
	testenv.Eventually(t, 180*time.Second, "every letter parked in the table", func() bool {
		var n int
		_ = f.Pool.QueryRow(ctx, `SELECT count(*) FROM cdc_relay_dead_letters WHERE slot = $1`, f.Slot).Scan(&n)
		return n >= rows || p.Exited()
	})
	cons := testenv.Consume(t, f.Topic)
	cons.WaitFor(t, 60*time.Second, "the rows after the letters", testenv.HasAll(after))
	testenv.Eventually(t, 60*time.Second, "the slot to confirm past the letters", func() bool { return f.SlotConfirmed(t) >= end })
	if !strings.Contains(p.Output(), "reading resumed") {
		t.Errorf("the relay did not say that reading resumed")
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
