package e2e

// A backlog: drained in batches and in large reads, every row intact; and under a backlog,
// shutdown under backpressure, the final standby status, batches over a topic's
// max.message.bytes, and an idle relay after a backlog.

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

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

// A backlog of 10 KB rows is drained in the large pieces of DESIGN.md, "Reading a backlog"
// (reads of up to 256 KiB through the relay's own read buffer, under pgconn's reused ones):
// every row arrives with exactly the payload it was committed with, none shares another's
// bytes, and a small row written once the backlog is drained still arrives.
func TestLargeRowBacklogArrivesIntact(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	const txns, perTx, pad = 150, 10, 320 // 1,500 rows of 10 KB (md5 hex, 32 bytes, 320 times), 10 a transaction
	var ids []int64
	for i := range txns {
		rows := make([]testenv.Row, perTx)
		for j := range rows {
			g := i*perTx + j
			rows[j] = testenv.Row{Key: "k" + strconv.Itoa(g%7), Payload: `{"g": ` + strconv.Itoa(g) + `, "pad": "` + padOf(g, pad) + `"}`}
		}
		ids = append(ids, e.F.Insert(t, false, rows...)...)
	}
	e.Start(t, nil)
	cons := testenv.Consume(t, e.F.Topic)
	recs := cons.WaitFor(t, 180*time.Second, "the 1,500 large rows", hasAll(ids))
	seen := map[int]bool{}
	for _, r := range recs {
		var v struct {
			G   int    `json:"g"`
			Pad string `json:"pad"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %s: value is not the row's JSON (%v): %.60q", testenv.Header(r, "outbox-id"), err, r.Value)
		}
		if want := padOf(v.G, pad); v.Pad != want {
			t.Fatalf("row g=%d: its payload's pad is not the one committed (%d bytes, want %d): bytes of another row", v.G, len(v.Pad), len(want))
		}
		if want := "k" + strconv.Itoa(v.G%7); string(r.Key) != want {
			t.Fatalf("row g=%d: key %q, want %q", v.G, r.Key, want)
		}
		seen[v.G] = true
	}
	if len(seen) != txns*perTx {
		t.Fatalf("%d distinct rows, want %d", len(seen), txns*perTx)
	}
	late := insertAged(t, e.F, 1, 0, false)
	cons.WaitFor(t, 30*time.Second, "a small row written after the backlog", hasAll(late))
}

// padOf is row g's filler: the md5 of its number in hex, n times, so that no two rows share it.
func padOf(g, n int) string {
	sum := md5.Sum([]byte(strconv.Itoa(g)))
	return strings.Repeat(hex.EncodeToString(sum[:]), n)
}

// firstDeliveries dedupes records by outbox id and returns the ids in the order of their first
// delivery, and how many records were duplicates.
func firstDeliveries(t *testing.T, recs []*kgo.Record) (order []int64, dups int) {
	t.Helper()
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		id := testenv.Header(r, "outbox-id")
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			t.Fatalf("record with outbox-id %q", id)
		}
		order = append(order, n)
	}
	return order, dups
}

// assertOrderedAndComplete checks that the first deliveries of one key's rows are exactly the
// committed ids, in commit order: nothing lost, no later id before an earlier one.
func assertOrderedAndComplete(t *testing.T, first, committed []int64) {
	t.Helper()
	bad := 0
	for i := 1; i < len(first); i++ {
		if first[i] <= first[i-1] {
			if bad++; bad <= 5 {
				t.Errorf("first deliveries out of order: id %d (position %d) after id %d", first[i], i, first[i-1])
			}
		}
	}
	if bad > 5 {
		t.Errorf("%d out-of-order first deliveries in all", bad)
	}
	got := make(map[int64]bool, len(first))
	for _, id := range first {
		got[id] = true
	}
	lost := 0
	for _, id := range committed {
		if !got[id] {
			if lost++; lost <= 5 {
				t.Errorf("outbox id %d lost", id)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d committed rows lost", lost, len(committed))
	}
}

// writeBacklog commits n one-row transactions on key k before any relay runs, and returns
// their ids, the WAL position after them and a consumer of the topic.
func writeBacklog(t *testing.T, f *testenv.Fixture, n int) ([]int64, pglogrepl.LSN, *testenv.Consumer) {
	t.Helper()
	committed := f.InsertOneRowTxns(t, n, "k", "", 0)
	return committed, f.CurrentWAL(t), testenv.Consume(t, f.Topic)
}

// stopMidBacklog waits until the consumer holds at least atLeast records, sends SIGTERM, and
// returns the exit code and the position the `stopped` line reports. It fails the test if that
// position is already past the backlog's end (the stop would not be in its middle).
func stopMidBacklog(t *testing.T, e *testenv.RelayEnv, p *testenv.Proc, cons *testenv.Consumer, atLeast int, end pglogrepl.LSN) (int, pglogrepl.LSN) {
	t.Helper()
	cons.WaitFor(t, 90*time.Second, fmt.Sprintf("%d records of the backlog", atLeast), func(r []*kgo.Record) bool { return len(r) >= atLeast })
	code := p.Stop(t)
	// The walsender may still be reading what the relay sent last: judge the slot once it is gone.
	e.F.SlotReleased(t, 30*time.Second)
	x, ok := testenv.StoppedConfirmed(t, p.Output())
	if !ok {
		t.Fatalf("no `stopped confirmed=X` line after SIGTERM (exit %d):\n%s", code, p.Output())
	}
	if x >= end {
		t.Fatalf("the relay confirmed the whole backlog (%s, backlog ends at %s) before SIGTERM: the stop was not in its middle", x, end)
	}
	return code, x
}

// SIGTERM while the producer's buffer is full (a backlog of one-row transactions
// on one key, --max-buffered-records 50). The relay exits 0, logs `stopped confirmed=X`, the slot
// holds exactly X once the process is gone, and after a restart the key's first deliveries are
// every committed id in commit order: a record abandoned at shutdown must not leave a gap that a
// later record of the same key jumps over.
func TestSIGTERMWithFullProducerBufferExitsCleanlyWithoutAGap(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	committed, end, cons := writeBacklog(t, e.F, 30_000)

	p := e.Start(t, nil, "--max-buffered-records", "50")
	code, x := stopMidBacklog(t, e, p, cons, 2_000, end)
	if code != 0 {
		t.Errorf("exit %d after SIGTERM with the producer buffer full, want 0", code)
	}
	if slot := e.F.SlotConfirmed(t); slot != x {
		t.Errorf("the relay logged stopped confirmed=%s, the slot holds %s after it exited: the final standby status was not applied", x, slot)
	}

	e.Start(t, nil)
	recs := e.Settle(t, cons, end)
	first, dups := firstDeliveries(t, recs)
	assertOrderedAndComplete(t, first, committed)
	t.Logf("SIGTERM at confirmed=%s (exit %d); %d records for %d rows, %d duplicates", x, code, len(recs), len(committed), dups)
}

// Clean stops in the middle of a backlog (default producer buffer, and a status
// interval of an hour, so that only the final standby status can move the slot to the end of what
// was delivered). Each time, the position the `stopped` line reports is the slot's
// confirmed_flush_lsn once the process has exited; so the restarts replay nothing the relay had
// confirmed: no record committed before such a position is delivered twice. The stop is repeated
// because the lost final status depends on what is in flight on the socket at the close.
func TestCleanStopMidBacklogLeavesTheSlotAtTheLoggedPosition(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	const backlog = 30_000
	committed, end, cons := writeBacklog(t, e.F, backlog)

	var confirmed []pglogrepl.LSN // what each stop logged
	var offsets []int64           // the topic's end offset once each stopped relay was gone
	for stop := 1; stop <= 3; stop++ {
		before := e.F.SlotConfirmed(t)
		p := e.Start(t, nil, "--status-interval", "1h")
		code, x := stopMidBacklog(t, e, p, cons, len(cons.Records())+2_000, end)
		if code != 0 {
			t.Errorf("stop %d: exit %d after SIGTERM, want 0", stop, code)
		}
		if x <= before {
			t.Fatalf("stop %d: stopped confirmed=%s, not past the slot's start %s: nothing to check", stop, x, before)
		}
		if slot := e.F.SlotConfirmed(t); slot != x {
			t.Errorf("stop %d: the relay logged stopped confirmed=%s, the slot holds %s after it exited: the final standby status was not applied", stop, x, slot)
		}
		confirmed = append(confirmed, x)
		offsets = append(offsets, testenv.EndOffset(t, e.F.Topic))
	}

	e.Start(t, nil)
	recs := e.Settle(t, cons, end)
	// One key, so one partition: a record's offset says which run published it. A run after
	// stop k must not publish again a transaction that stop k confirmed.
	replayed := 0
	for _, r := range recs {
		for k, x := range confirmed {
			if r.Offset >= offsets[k] && lsnOf(t, r) < x {
				if replayed++; replayed <= 5 {
					t.Errorf("outbox id %s (commit %s) published again after stop %d had confirmed %s", testenv.Header(r, "outbox-id"), lsnOf(t, r), k+1, x)
				}
				break
			}
		}
	}
	if replayed > 0 {
		t.Errorf("%d records replayed from before a confirmed position (stops logged %v)", replayed, confirmed)
	}
	first, dups := firstDeliveries(t, recs)
	assertOrderedAndComplete(t, first, committed)
	t.Logf("stops logged confirmed=%v; %d records for %d rows, %d duplicates", confirmed, len(recs), len(committed), dups)
}

// randomJSON returns a JSON object of about n bytes that no compression shrinks below half.
func randomJSON(n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return `{"pad": "` + hex.EncodeToString(b) + `"}`
}

// A topic with max.message.bytes=20000 and a backlog of 300 rows of ~1 KB each.
// Each record fits, but a batch of them does not: every row arrives on the topic and none on
// the dead-letter topic. A single ~48 KB row does not fit on its own: it alone is dead-lettered
// with MESSAGE_TOO_LARGE, and the rows after it arrive.
func TestRecordsThatFitTheTopicAreNotDeadLetteredAsABatch(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	f := e.F
	limited := f.LimitedTopic(t, "limited", "20000")
	t.Cleanup(func() {
		_, _ = f.Pool.Exec(context.Background(), `DELETE FROM cdc_relay_dead_letters WHERE slot = $1`, f.Slot)
	})

	var fit []int64
	for i := 0; i < 30; i++ {
		var rows []testenv.Row
		for j := 0; j < 10; j++ {
			rows = append(rows, testenv.Row{Key: fmt.Sprintf("k%d", j), Topic: limited, Payload: randomJSON(1000)})
		}
		fit = append(fit, f.Insert(t, false, rows...)...)
	}
	big := f.Insert(t, false, testenv.Row{Key: "k0", Topic: limited, Payload: randomJSON(48_000)})[0]
	var after []int64
	for i := 0; i < 20; i++ {
		after = append(after, f.Insert(t, false, testenv.Row{Key: fmt.Sprintf("k%d", i%10), Topic: limited, Payload: randomJSON(1000)})...)
	}
	end := f.CurrentWAL(t)

	cons := testenv.Consume(t, limited)
	dlq := testenv.Consume(t, f.DLQ)
	p := e.Start(t, nil)
	// Every row is handled one way or the other once the slot confirms past the last.
	testenv.Eventually(t, 90*time.Second, "the slot to confirm past every row", func() bool { return f.SlotConfirmed(t) >= end || p.Exited() })
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
	onTopic, onDLQ := testenv.EndOffset(t, limited), testenv.EndOffset(t, f.DLQ)
	recs := cons.WaitFor(t, 30*time.Second, "every record on the topic", func(r []*kgo.Record) bool { return int64(len(r)) >= onTopic })
	dead := dlq.WaitFor(t, 30*time.Second, "every record on the dead-letter topic", func(r []*kgo.Record) bool { return int64(len(r)) >= onDLQ })

	got := ids(recs)
	missing := 0
	for _, id := range append(append([]int64{}, fit...), after...) {
		if got[strconv.FormatInt(id, 10)] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d rows that fit the topic's max.message.bytes are not on it", missing, len(fit)+len(after))
	}
	if got[strconv.FormatInt(big, 10)] != 0 {
		t.Errorf("the 48 KB row %d is on a topic with max.message.bytes=20000", big)
	}
	var bigLetter *kgo.Record
	wrongly := 0
	for _, r := range dead {
		if testenv.Header(r, "outbox-id") == strconv.FormatInt(big, 10) {
			bigLetter = r
			continue
		}
		if wrongly++; wrongly <= 3 {
			t.Errorf("outbox id %s dead-lettered although it fits the topic: %s", testenv.Header(r, "outbox-id"), testenv.Header(r, "dlq-error"))
		}
	}
	if wrongly > 0 {
		t.Errorf("%d records that fit were dead-lettered", wrongly)
	}
	if bigLetter == nil {
		t.Errorf("the 48 KB row %d was not dead-lettered", big)
	} else if errText := testenv.Header(bigLetter, "dlq-error"); !strings.Contains(errText, "MESSAGE_TOO_LARGE") || testenv.Header(bigLetter, "dlq-original-topic") != limited {
		t.Errorf("dead letter of the 48 KB row: dlq-error %q, original topic %q", errText, testenv.Header(bigLetter, "dlq-original-topic"))
	}
	var parked int
	_ = f.Pool.QueryRow(t.Context(), `SELECT count(*) FROM cdc_relay_dead_letters WHERE slot = $1`, f.Slot).Scan(&parked)
	if parked != 0 {
		t.Errorf("%d records parked in cdc_relay_dead_letters, want none", parked)
	}
	t.Logf("%d records on the topic, %d dead letters, %d parked", len(recs), len(dead), parked)
}

// After draining a backlog of one-row transactions (which raises SO_RCVLOWAT and
// paces reads) and catching up, a relay with nothing to do uses under ~1 % of a core: measured
// as the process's utime+stime over a 3 s idle window, with the fixture's 1 s status interval.
// The non-race binary, so that the figure is the relay's own; and a PostgreSQL of the test's own,
// since other tests' WAL on the shared server reaches every walsender and so every relay.
func TestRelayIsIdleAfterDrainingABacklog(t *testing.T) {
	t.Parallel()
	e := testenv.NewPrivateRelayEnv(t, false)
	const backlog = 20_000
	committed, end, cons := writeBacklog(t, e.F, backlog)
	p := e.Start(t, nil, "--metrics-addr", "")
	recs := e.Settle(t, cons, end)
	first, _ := firstDeliveries(t, recs)
	assertOrderedAndComplete(t, first, committed)

	// Caught up: every row is in Kafka and confirmed. Nothing is written to the outbox now.
	const window = 3 * time.Second
	const hz = 100 // USER_HZ
	measure := func() int64 {
		t.Helper()
		a, err := testenv.CPUTicks(p.PID())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(window) // the measurement window itself
		b, err := testenv.CPUTicks(p.PID())
		if err != nil {
			t.Fatal(err)
		}
		return b - a
	}
	ticks := measure()
	pct := float64(ticks) * 100 / (window.Seconds() * hz)
	// 1 % of a core over 3 s is 3 ticks; a tick's granularity is the slack.
	if ticks > 3 {
		t.Errorf("idle relay used %d ticks (%.1f %% of a core) over %s after draining a backlog, want at most 3 (~1 %%)", ticks, pct, window)
	}
	if p.Exited() {
		t.Fatalf("the relay exited:\n%s", p.Output())
	}
	t.Logf("idle after a %d-row backlog: %d ticks over %s (%.1f %% of a core)", backlog, ticks, window, pct)
}
