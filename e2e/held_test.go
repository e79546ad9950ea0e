package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// One dead letter that neither the dead-letter topic nor the dead-letter table takes holds the
// position (right), but reading went on and every later transaction waited in the tracker:
// 1,000,000 one-row transactions behind one held letter grew the relay from 18 to 140 MB. The
// tracker now holds at most twice --max-buffered-records transactions: reading pauses, the relay says
// what it waits for (the dead-letter table), since when and how many transactions wait, and
// memory stays flat. Once the table takes the letter, everything behind it arrives.
//
// CDC_RELAY_HELD_ROWS sets the rows behind the letter (default 30,000; the measurement in the
// README used 1,000,000).
func TestHeldDeadLetterPausesReadingInBoundedMemory(t *testing.T) {
	rows := 30_000
	if v, err := strconv.Atoi(os.Getenv("CDC_RELAY_HELD_ROWS")); err == nil && v > 0 {
		rows = v
	}
	const maxRecords = 1000
	e := testenv.NewRelayEnv(t, false) // no race detector: its shadow memory would blur the RSS
	f := e.F
	ctx := context.Background()
	// The letter: too large for its topic, and for the dead-letter topic too; the table refuses
	// this slot's letters (other tests share it) until the check goes.
	big := f.LimitedTopic(t, "small", "2000")
	testenv.SetTopicConfig(t, f.DLQ, "max.message.bytes", "2000")
	dropCheck := f.RefuseDeadLetters(t)

	p := e.Start(t, nil, "--max-buffered-records", strconv.Itoa(maxRecords), "--metrics-addr", "127.0.0.1:0")
	addr := metricsAddr(t, p)
	cons := testenv.Consume(t, f.Topic)
	warm := f.InsertOneRowTxns(t, 2000, "warm", "", 64) // the relay's steady working set first
	cons.WaitFor(t, 60*time.Second, "the rows before the letter", testenv.HasAll(warm))
	if _, err := f.Pool.Exec(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload) VALUES ('held', $1, to_jsonb(repeat('x', 5000)))`, big); err != nil {
		t.Fatal(err)
	}
	const refused = "cannot park dead letters in PostgreSQL"
	testenv.Eventually(t, 60*time.Second, "the table to refuse the letter", func() bool { return p.Exited() || strings.Contains(p.Output(), refused) })
	time.Sleep(2 * time.Second) // settle
	before, err := testenv.RSS(p.PID())
	if err != nil {
		t.Fatal(err)
	}

	behind := f.InsertOneRowTxns(t, rows, "behind", "", 64)
	const paused = "reading paused: the confirmed position is held"
	testenv.Eventually(t, 180*time.Second, "reading to pause", func() bool { return p.Exited() || strings.Contains(p.Output(), paused) })
	// Let the relay read whatever it would read.
	time.Sleep(5 * time.Second)
	after, err := testenv.RSS(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	peak, _ := testenv.RSSPeak(p.PID())
	m := scrape(t, addr)
	inFlight := m["cdc_relay_transactions_in_flight"]
	var pauseLine string
	for _, l := range strings.Split(p.Output(), "\n") {
		if strings.Contains(l, paused) {
			pauseLine = l
			break
		}
	}
	t.Logf("%d one-row transactions behind one held letter: RSS %.1f MB before them, %.1f MB after (%+.1f MB), peak %.1f MB; %v transactions in flight (limit %d)\n%s",
		rows, float64(before)/(1<<20), float64(after)/(1<<20), float64(after-before)/(1<<20), float64(peak)/(1<<20), inFlight, 2*maxRecords, pauseLine)
	if inFlight > 2*maxRecords {
		t.Errorf("%v transactions in flight behind the held letter, want at most %d (twice --max-buffered-records)", inFlight, 2*maxRecords)
	}
	if after-before > 15<<20 {
		t.Errorf("RSS grew by %.1f MB behind the held letter, want under 15 MB", float64(after-before)/(1<<20))
	}
	if !strings.Contains(pauseLine, "dead-letter table") || !strings.Contains(pauseLine, "transactions_waiting=") {
		t.Errorf("the pause does not say that it waits for the dead-letter table and how many transactions wait:\n%s", pauseLine)
	}

	dropCheck()
	cons.WaitFor(t, 180*time.Second, "every row behind the letter", testenv.HasAll(behind))
	if !strings.Contains(p.Output(), "reading resumed") {
		t.Errorf("the relay did not say that reading resumed")
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
