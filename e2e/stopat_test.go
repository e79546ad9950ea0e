package e2e

// run --stop-at-lsn: the old generation of a reshard drains up to the new slots' start. It
// publishes exactly the transactions whose commit LSN is below the stop, confirms the slot at
// the stop and exits 0, in both delivery modes; a second run at the same stop publishes
// nothing and exits 0 again; a stop with nothing committed after it is passed by a keepalive;
// a bad value is refused with exit 2.

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

func TestStopAtLSNPublishesExactlyTheTransactionsCommittedBeforeIt(t *testing.T) {
	for _, mode := range []string{"at-least-once", "exactly-once"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := testenv.NewRelayEnv(t, true)
			f := e.F
			args := []string{"--delivery", mode}
			if mode == "exactly-once" {
				args = append(args, "--checkpoint-topic", f.Name+".checkpoints")
				testenv.CreateTopicWithConfig(t, f.Name+".checkpoints", 1, kafkatxn.CheckpointTopicConfigs)
			}
			before := f.InsertOneRowTxns(t, 40, "k", "", 0)
			stop := f.CurrentWAL(t)
			after := f.InsertOneRowTxns(t, 40, "k", "", 0)
			cons := testenv.Consume(t, f.Topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()))

			p := e.Start(t, nil, append(args, "--stop-at-lsn", stop.String())...)
			if code, _ := p.Wait(t, 90*time.Second); code != 0 {
				t.Fatalf("run --stop-at-lsn %s: exit %d, want 0:\n%s", stop, code, p.Output())
			}
			if !strings.Contains(p.Output(), "reached --stop-at-lsn") {
				t.Errorf("run --stop-at-lsn exited 0 without saying it reached the stop:\n%s", p.Output())
			}
			f.SlotReleased(t, 30*time.Second)
			if got := f.SlotConfirmed(t); got < stop {
				t.Errorf("the slot is confirmed at %s after the stop at %s: the drained transactions would replay", got, stop)
			}
			recs := cons.WaitFor(t, 60*time.Second, "the rows committed before the stop", hasAll(before))
			assertExactly(t, recs, before, after)
			end := testenv.EndOffset(t, f.Topic)

			// A second run at the same stop: the slot starts at it, so what it streams first passes it.
			p = e.Start(t, nil, append(args, "--stop-at-lsn", stop.String())...)
			if code, _ := p.Wait(t, 90*time.Second); code != 0 {
				t.Fatalf("second run --stop-at-lsn %s: exit %d, want 0:\n%s", stop, code, p.Output())
			}
			if x, ok := testenv.StoppedConfirmed(t, p.Output()); !ok || x < stop || !strings.Contains(p.Output(), " published=0 ") {
				t.Errorf("second run --stop-at-lsn %s: want `stopped confirmed>=%s published=0`:\n%s", stop, stop, p.Output())
			}
			if end2 := testenv.EndOffset(t, f.Topic); end2 != end {
				t.Errorf("the topic's end offset moved from %d to %d during the second run at the same stop", end, end2)
			}

			// A stop with nothing of this test committed after it: a keepalive's WAL end passes it,
			// within seconds (the server answers the relay's first status with one). Other tests'
			// transactions may pass it too, but not that soon on every run.
			last := f.CurrentWAL(t)
			p = e.Start(t, nil, append(args, "--stop-at-lsn", last.String())...)
			if code, _ := p.Wait(t, 30*time.Second); code != 0 {
				t.Fatalf("run --stop-at-lsn %s (the WAL's end, nothing after it): exit %d, want 0:\n%s", last, code, p.Output())
			}
			recs = cons.WaitFor(t, 60*time.Second, "the rows committed after the first stop", hasAll(after))
			assertExactly(t, recs, append(before, after...), nil)
			if got := f.SlotConfirmed(t); got < last {
				t.Errorf("the slot is confirmed at %s after the stop at %s", got, last)
			}
		})
	}
}

// assertExactly fails unless recs are every id of want once and none of never.
func assertExactly(t *testing.T, recs []*kgo.Record, want, never []int64) {
	t.Helper()
	got := ids(recs)
	for _, id := range want {
		if n := got[strconv.FormatInt(id, 10)]; n != 1 {
			t.Errorf("outbox id %d (committed before the stop) published %d times, want once", id, n)
		}
	}
	for _, id := range never {
		if n := got[strconv.FormatInt(id, 10)]; n != 0 {
			t.Errorf("outbox id %d (committed after the stop) published %d times, want never", id, n)
		}
	}
}

func TestStopAtLSNRefusesABadValue(t *testing.T) {
	t.Parallel()
	bin := testenv.Binary(t, false)
	for _, v := range []string{"soon", "0/0", "1/2/3"} {
		_, errOut, code := testenv.Run(t, 30*time.Second, bin, nil, "run", "--pg-url", "postgres://127.0.0.1:1/x", "--brokers", "127.0.0.1:1",
			"--slot", "s", "--publication", "p", "--stop-at-lsn", v)
		if code != 2 || !strings.Contains(errOut, "--stop-at-lsn") || !strings.Contains(errOut, "X/Y") {
			t.Errorf("--stop-at-lsn %q: exit %d, want 2 with what to write:\n%s", v, code, errOut)
		}
	}
}
