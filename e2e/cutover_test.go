package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// writer inserts two-row transactions into a fixture's table until stopped, like a service
// that keeps running through a cutover.
type writer struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	ids  []int64
	err  error
}

func startWriter(t *testing.T, f *testenv.Fixture, every time.Duration) *writer {
	t.Helper()
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		ctx := context.Background()
		for n := 0; ; n++ {
			select {
			case <-w.stop:
				return
			case <-time.After(every):
			}
			rows, err := f.Pool.Query(ctx, `INSERT INTO `+f.Table+` (aggregate_id, topic, payload)
				SELECT 'k' || (($1 + g) % 5), $2, jsonb_build_object('n', $1, 'g', g) FROM generate_series(1, 2) g RETURNING id`, n, f.Topic)
			if err == nil {
				var got []int64
				got, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				w.mu.Lock()
				w.ids = append(w.ids, got...)
				w.mu.Unlock()
			}
			if err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			close(w.stop)
			<-w.done
		}
	})
	return w
}

// Stop stops the writer and returns the ids it committed.
func (w *writer) Stop(t *testing.T) []int64 {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	return w.ids
}

// idSet reads the ids of the table's rows matching where.
func idSet(t *testing.T, f *testenv.Fixture, where string) map[string]bool {
	t.Helper()
	rows, err := f.Pool.Query(context.Background(), `SELECT id::text FROM `+f.Table+` WHERE `+where)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	s := make(map[string]bool, len(got))
	for _, id := range got {
		s[id] = true
	}
	return s
}

// caughtUp waits until the consumer has read every record on the topic now.
func caughtUp(t *testing.T, cons *testenv.Consumer, topic string) []*kgo.Record {
	t.Helper()
	end := testenv.EndOffset(t, topic)
	return cons.WaitFor(t, 60*time.Second, "every record on the topic", func(r []*kgo.Record) bool { return int64(len(r)) >= end })
}

// tally checks the final delivery: every committed row at least once, nothing else, and a
// row twice only if it is in window. It returns the duplicated ids, sorted.
func tally(t *testing.T, recs []*kgo.Record, committed []int64, window map[string]bool) []string {
	t.Helper()
	got := ids(recs)
	want := make(map[string]bool, len(committed))
	for _, id := range committed {
		s := strconv.FormatInt(id, 10)
		want[s] = true
		if got[s] == 0 {
			t.Errorf("committed row %s never reached Kafka", s)
		}
	}
	var dups []string
	for id, n := range got {
		if !want[id] {
			t.Errorf("row %s reached Kafka but the writer never committed it", id)
		}
		if n > 1 {
			dups = append(dups, id)
			if !window[id] || n > 2 {
				t.Errorf("row %s published %d times; only rows of the named window may be published twice", id, n)
			}
		}
	}
	sort.Slice(dups, func(i, j int) bool {
		return len(dups[i]) < len(dups[j]) || len(dups[i]) == len(dups[j]) && dups[i] < dups[j]
	})
	return dups
}

var cutoverPublished = regexp.MustCompile(`published (\d+) of the (\d+) rows pending`)

// From a polling publisher to the relay with a writer running throughout: the old poller is
// killed between Kafka's acknowledgement and its mark (the worst moment), `cutover` creates the
// slot with an exported snapshot and publishes the rows pending in it, `run` streams the rest.
// Every committed row reaches Kafka; rows the old poller marked are not sent again; the only
// duplicates are the rows the old poller had produced but not marked.
func TestCutoverFromPollingLosesNothing(t *testing.T) {
	t.Parallel()
	e := newPollEnv(t)
	f := e.F
	env := f.SlotEnv()
	cons := testenv.Consume(t, f.Topic)
	w := startWriter(t, f, 3*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // a backlog, so the old poller runs full batches

	const batch = 10
	old := e.Start(t, []string{"CDC_RELAY_TEST_CRASH_AFTER_BATCHES=8"}, "--batch", strconv.Itoa(batch))
	old.WaitKilled(t, 60*time.Second)
	marked := idSet(t, f, `published_at IS NOT NULL`)
	polled := ids(caughtUp(t, cons, f.Topic))
	window := map[string]bool{} // produced by the old poller, not marked
	for id := range polled {
		if !marked[id] {
			window[id] = true
		}
	}
	if len(marked) == 0 || len(window) == 0 || len(window) > batch {
		t.Fatalf("old poller: %d rows marked, %d produced but not marked; want some marked and one batch (at most %d) in the window", len(marked), len(window), batch)
	}

	out, errOut, code := testenv.Run(t, 120*time.Second, e.Bin, env, "cutover", "--table", f.Table, "--dlq-topic", f.DLQ, "--batch", "50")
	if code != 0 {
		t.Fatalf("cutover: exit %d\n%s%s", code, out, errOut)
	}
	m := cutoverPublished.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("cutover printed no tally:\n%s", out)
	}
	// A second cutover finds the slot: its snapshot is gone, so it refuses.
	if out2, errOut2, code := testenv.Run(t, 60*time.Second, e.Bin, env, "cutover", "--table", f.Table, "--dlq-topic", f.DLQ); code != 2 || !strings.Contains(errOut2, "already exists") {
		t.Errorf("second cutover: exit %d, want 2 and \"already exists\"\n%s%s", code, out2, errOut2)
	}
	re := &testenv.RelayEnv{F: f, Bin: e.Bin, Env: env}
	relay := re.Start(t, nil)
	time.Sleep(1500 * time.Millisecond)
	committed := w.Stop(t)
	recs := re.Settle(t, cons, f.CurrentWAL(t))
	relay.Stop(t)

	got := ids(recs)
	for id := range marked {
		if got[id] != 1 {
			t.Errorf("row %s, marked by the old poller, published %d times", id, got[id])
		}
	}
	dups := tally(t, recs, committed, window)
	t.Logf("cutover tallies: written %d rows; on Kafka %d records, %d distinct rows; old poller marked %d, window (produced, not marked) %d; cutover published %s of %s pending in the snapshot; duplicates %d, all from the old poller's window: %s",
		len(committed), len(recs), len(got), len(marked), len(window), m[1], m[2], len(dups), strings.Join(dups, ","))
}

// From the relay back to polling with a writer running throughout: the relay is killed between
// Kafka's acknowledgement and its confirmation, `outbox mark-published` marks what the slot
// confirmed, `poll` publishes the rest. Every committed row reaches Kafka; the only duplicates
// are rows the relay delivered and had not confirmed.
func TestMarkPublishedBackToPollingLosesNothing(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	if out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, nil, "poll", "--create-index", "--table", f.Table); code != 0 {
		t.Fatalf("poll --create-index: exit %d\n%s%s", code, out, errOut)
	}
	cons := testenv.Consume(t, f.Topic)
	w := startWriter(t, f, 3*time.Millisecond)
	// --confirm-delay 1ms: each position Kafka's acknowledgements earn reaches the slot at once,
	// so the 59 confirmations before the kill move it past delivered rows. With the default
	// 100 ms, a backlog whose first 60 transactions are acknowledged within one delay (a loaded
	// machine delivers them in a burst) is killed before any earned position was sent, and
	// mark-published rightly marks nothing.
	relay := e.Start(t, []string{"CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=60"}, "--confirm-delay", "1ms")
	relay.WaitKilled(t, 60*time.Second)
	relayed := ids(caughtUp(t, cons, f.Topic))

	out, errOut, code := testenv.Run(t, 60*time.Second, e.Bin, e.Env, "outbox", "mark-published", "--table", f.Table)
	if code != 0 {
		t.Fatalf("outbox mark-published: exit %d\n%s%s", code, out, errOut)
	}
	pending := idSet(t, f, `published_at IS NULL`)
	window := map[string]bool{} // delivered by the relay, left pending: not confirmed
	marked := 0
	for id := range relayed {
		if pending[id] {
			window[id] = true
		} else {
			marked++
		}
	}
	if marked == 0 {
		t.Fatalf("mark-published marked none of the %d rows the relay delivered:\n%s", len(relayed), out)
	}

	p := testenv.Start(t, e.Bin, nil, "poll", "--table", f.Table, "--dlq-topic", f.DLQ, "--interval", "20ms")
	time.Sleep(1500 * time.Millisecond)
	committed := w.Stop(t)
	testenv.Eventually(t, 60*time.Second, "every row marked published by the poller", func() bool {
		return len(idSet(t, f, `published_at IS NULL`)) == 0
	})
	p.Stop(t)
	recs := caughtUp(t, cons, f.Topic)
	got := ids(recs)
	dups := tally(t, recs, committed, window)
	t.Logf("mark-published: %s", strings.TrimSpace(out))
	t.Logf("back-to-polling tallies: written %d rows; on Kafka %d records, %d distinct rows; relay delivered %d before its kill -9, %d of them marked, window (delivered, not confirmed) %d; duplicates %d, all from the relay's window: %s",
		len(committed), len(recs), len(got), len(relayed), marked, len(window), len(dups), strings.Join(dups, ","))
}

// After a clean stop the slot has confirmed everything the relay delivered, so the peek finds
// no undelivered row and `outbox mark-published` must mark every pending row. It marked none:
// the empty list of undelivered ids reached SQL as NULL, and `NOT (id = ANY(NULL))` is NULL, so
// the poller would have published the whole table again.
func TestMarkPublishedAfterCleanStopMarksEveryDeliveredRow(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, false)
	f := e.F
	cons := testenv.Consume(t, f.Topic)
	var want []int64
	for i := 0; i < 10; i++ {
		want = append(want, f.Insert(t, false, testenv.Row{Key: fmt.Sprintf("k%d", i%3), Payload: `{"n":1}`})...)
	}
	relay := e.Start(t, nil)
	cons.WaitFor(t, 60*time.Second, "the 10 rows", hasAll(want))
	if code := relay.Stop(t); code != 0 {
		t.Fatalf("relay exit %d after SIGTERM:\n%s", code, relay.Output())
	}
	out, errOut, code := testenv.Run(t, 60*time.Second, e.Bin, e.Env, "outbox", "mark-published", "--table", f.Table)
	if code != 0 {
		t.Fatalf("outbox mark-published: exit %d\n%s%s", code, out, errOut)
	}
	if pending := idSet(t, f, `published_at IS NULL`); len(pending) != 0 {
		t.Fatalf("after a clean stop, %d of %d delivered rows are still pending (the poller would publish them again):\n%s", len(pending), len(want), out)
	}
	if !strings.Contains(out, "marked 10 rows") {
		t.Fatalf("mark-published output does not say it marked the 10 rows:\n%s", out)
	}
}
