package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// opsSeeds are the seeds TestOperatorCommandsAsProperties runs: CDC_RELAY_OPS_SEEDS
// ("1,2,3" unless set; e.g. CDC_RELAY_OPS_SEEDS=17 replays one schedule).
func opsSeeds(t *testing.T) []uint64 {
	s := os.Getenv("CDC_RELAY_OPS_SEEDS")
	if s == "" {
		s = "1,2,3"
	}
	var seeds []uint64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			t.Fatalf("CDC_RELAY_OPS_SEEDS=%q: %v", s, err)
		}
		seeds = append(seeds, n)
	}
	return seeds
}

// The operator commands as properties, over seeded schedules against the real PostgreSQL and
// Kafka: rounds of writes (good rows, bad rows, rows too large for their topic), relay runs
// with a writer going that end in a kill -9 between Kafka's acknowledgement and the
// confirmation or in a SIGTERM at a random moment, and between runs `outbox mark-published`,
// `dead-letters replay --all`, `dead-letters discard` of the bad rows and the too-large topic's
// limit raised; at the end back to polling: mark-published, `poll` for what is left pending,
// the last replays. Checked:
//   - after every mark-published, every row marked published is on Kafka (its topic or the
//     dead-letter topic): the poller will never send it, so a wrong mark is a loss; after a
//     clean stop at most one transaction's delivered rows are left pending (the one the stop
//     cut);
//   - at the end every committed good row and every too-large row is on its topic, no bad row is
//     on any topic but the dead-letter one;
//   - no event was sent twice by the commands themselves: at most one record with
//     cdc-replayed-at per event, at most one record from `poll` per row, none for a row
//     mark-published marked, and the last replay sends nothing.
func TestOperatorCommandsAsProperties(t *testing.T) {
	t.Parallel()
	for _, seed := range opsSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			opsSchedule(t, seed)
		})
	}
}

func opsSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x6f7073))
	e := testenv.NewRelayEnv(t, false)
	f := e.F
	small := f.LimitedTopic(t, "small", "2048")
	marks := "public." + f.Name + "_marks"
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+marks) })
	if out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, nil, "poll", "--create-index", "--table", f.Table); code != 0 {
		t.Fatalf("poll --create-index: exit %d\n%s%s", code, out, errOut)
	}
	cons, smallCons, dlqCons := testenv.Consume(t, f.Topic), testenv.Consume(t, small), testenv.Consume(t, f.DLQ)
	dlEnv := append(append([]string{}, e.Env...), "CDC_RELAY_DLQ_TOPIC="+f.DLQ, "CDC_RELAY_MARKS_TABLE="+marks)

	var good, bad, large []int64
	var steps []string // the schedule, for failure messages
	step := func(format string, args ...any) {
		steps = append(steps, fmt.Sprintf(format, args...))
		t.Logf("seed %d: %s", seed, steps[len(steps)-1])
	}
	defer func() {
		if t.Failed() {
			t.Logf("seed %d schedule (CDC_RELAY_OPS_SEEDS=%d replays it):\n  %s", seed, seed, strings.Join(steps, "\n  "))
		}
	}()
	n := 0
	row := func() testenv.Row {
		n++
		return testenv.Row{Key: fmt.Sprintf("k%d", n%5), Payload: fmt.Sprintf(`{"n": %d}`, n)}
	}
	markedByCmd := map[string]bool{}

	// delivered returns the ids on the topic, the too-large topic and the dead-letter topic.
	delivered := func() map[string]bool {
		d := map[string]bool{}
		for _, c := range []struct {
			cons  *testenv.Consumer
			topic string
		}{{cons, f.Topic}, {smallCons, small}, {dlqCons, f.DLQ}} {
			for id := range ids(caughtUp(t, c.cons, c.topic)) {
				d[id] = true
			}
		}
		return d
	}
	markPublished := func(cleanStop bool) {
		out, errOut, code := testenv.Run(t, 90*time.Second, e.Bin, e.Env, "outbox", "mark-published", "--table", f.Table)
		if code != 0 {
			t.Fatalf("outbox mark-published: exit %d\n%s%s", code, out, errOut)
		}
		d := delivered()
		marked := idSet(t, f, `published_at IS NOT NULL`)
		for id := range marked {
			markedByCmd[id] = true
			if !d[id] {
				t.Errorf("row %s marked published but on no topic: the poller will never send it (%s)", id, strings.TrimSpace(out))
			}
		}
		var left []string
		for id := range idSet(t, f, `published_at IS NULL`) {
			if d[id] {
				left = append(left, id)
			}
		}
		step("mark-published: %d marked, %d delivered rows left pending (the replay window)", len(marked), len(left))
		if cleanStop && len(left) > 2 {
			t.Errorf("after a clean stop %d delivered rows were left pending (%v...), more than the one transaction the stop cut: %s", len(left), left[:min(len(left), 8)], strings.TrimSpace(out))
		}
	}
	replay := func() string {
		out, code := dlCLI(t, e.Bin, dlEnv, "replay", "--all")
		if code != 0 && code != 1 {
			t.Fatalf("dead-letters replay --all: exit %d", code)
		}
		step("replay: %s", tallyLine(out))
		return out
	}
	discardBad := func() {
		out, code := dlCLI(t, e.Bin, dlEnv, "discard", "--reason", "bad row")
		if code != 0 {
			t.Fatalf("dead-letters discard --reason 'bad row': exit %d", code)
		}
		step("discard the bad rows: %s", tallyLine(out))
	}
	raised := false
	raise := func() {
		testenv.SetTopicConfig(t, small, "max.message.bytes", "1048576")
		raised = true
		step("raise %s's max.message.bytes", small)
	}

	rounds := 3 + rng.IntN(3)
	lastClean := false
	for r := range rounds {
		txs := rng.IntN(4)
		for range txs {
			good = append(good, f.Insert(t, false, row(), row())...)
		}
		b, l := rng.IntN(3) == 0, rng.IntN(3) == 0
		if b {
			bad = append(bad, f.Insert(t, false, testenv.Row{Key: "", Payload: `{"bad": true}`})...)
		}
		if l {
			large = append(large, f.Insert(t, false, testenv.Row{Key: "big", Topic: small, Payload: `{"pad": "` + strings.Repeat("x", 4096) + `"}`})...)
		}
		step("round %d: %d two-row transactions, bad row %v, too-large row %v", r, txs, b, l)

		w := startWriter(t, f, 3*time.Millisecond)
		mode := rng.IntN(3)
		clean := mode > 0
		lastClean = clean
		switch mode {
		case 1: // a busy stop: SIGTERM at a random moment while the writer runs
			wait := time.Duration(rng.IntN(1000)) * time.Millisecond
			p := e.Start(t, nil)
			started(t, p, "msg=streaming")
			time.Sleep(wait) // the schedule's stop moment, not a wait for a condition
			if code := p.Stop(t); code != 0 {
				t.Fatalf("relay exit %d after SIGTERM:\n%s", code, p.Output())
			}
			step("relay run, SIGTERM after %s", wait)
		case 2: // a quiet stop: the writer stops, the relay catches up, then SIGTERM
			p := e.Start(t, nil)
			started(t, p, "msg=streaming")
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond) // the writer's run, not a wait for a condition
			good = append(good, w.Stop(t)...)
			upTo := f.CurrentWAL(t)
			testenv.Eventually(t, 120*time.Second, "the relay to confirm everything written", func() bool { return f.SlotConfirmed(t) >= upTo })
			if code := p.Stop(t); code != 0 {
				t.Fatalf("relay exit %d after SIGTERM:\n%s", code, p.Output())
			}
			step("relay run, caught up, SIGTERM")
		default:
			k := 20 + rng.IntN(60)
			p := e.Start(t, []string{fmt.Sprintf("CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=%d", k)})
			p.WaitKilled(t, 120*time.Second)
			step("relay run, kill -9 before the %dth confirmation", k)
		}
		if mode != 2 {
			good = append(good, w.Stop(t)...)
		}

		if rng.IntN(2) == 0 || mode == 2 { // after a quiet stop always: the common way back
			markPublished(clean)
		}
		if !raised && rng.IntN(3) == 0 {
			raise()
		}
		if rng.IntN(2) == 0 {
			replay()
		}
		if rng.IntN(4) == 0 {
			discardBad()
		}
	}

	// Back to polling after the last run, however it ended: mark-published, then poll publishes
	// what is left pending (the limit raised first, so that the too-large rows fit), then the
	// letters are dealt with: the bad rows discarded, the rest replayed until nothing is refused,
	// and once more, which must send nothing.
	markPublished(lastClean)
	if !raised {
		raise()
	}
	pp := testenv.Start(t, e.Bin, nil, "poll", "--table", f.Table, "--dlq-topic", f.DLQ, "--interval", "20ms")
	started(t, pp, "msg=polling")
	testenv.Eventually(t, 60*time.Second, "every row marked published by the poller", func() bool {
		return len(idSet(t, f, `published_at IS NULL`)) == 0
	})
	if code := pp.Stop(t); code != 0 {
		t.Fatalf("poll exit %d:\n%s", code, pp.Output())
	}
	step("poll published the rest")
	discardBad()
	// The raised limit may take a moment to show in DescribeConfigs.
	testenv.Eventually(t, 60*time.Second, "a replay with nothing refused", func() bool {
		return strings.Contains(replay(), ", refused 0")
	})
	if out := replay(); !strings.Contains(out, "replayed 0, refused 0") {
		t.Errorf("the last replay sent something: %s", tallyLine(out))
	}

	main, sm, dl := caughtUp(t, cons, f.Topic), caughtUp(t, smallCons, small), caughtUp(t, dlqCons, f.DLQ)
	got, sgot, dgot := ids(main), ids(sm), ids(dl)
	for _, id := range good {
		if got[strconv.FormatInt(id, 10)] == 0 {
			t.Errorf("committed row %d never reached %s", id, f.Topic)
		}
	}
	for _, id := range large {
		if sgot[strconv.FormatInt(id, 10)] == 0 {
			t.Errorf("too-large row %d never reached %s after the limit was raised", id, small)
		}
	}
	for _, id := range bad {
		s := strconv.FormatInt(id, 10)
		if got[s] > 0 || sgot[s] > 0 {
			t.Errorf("bad row %d was published", id)
		}
		if dgot[s] == 0 {
			t.Errorf("bad row %d is not on the dead-letter topic", id)
		}
	}
	replayed, polled := map[string]int{}, map[string]int{}
	for _, r := range append(append([]*kgo.Record{}, main...), sm...) {
		id := testenv.Header(r, "outbox-id")
		if testenv.Header(r, "cdc-replayed-at") != "" {
			replayed[id]++
		}
		if testenv.Header(r, "cdc-lsn") == "" && testenv.Header(r, "cdc-replayed-at") == "" {
			polled[id]++
		}
	}
	for id, c := range replayed {
		if c > 1 {
			t.Errorf("dead-letters replay sent outbox id %s %d times", id, c)
		}
	}
	for id, c := range polled {
		if c > 1 {
			t.Errorf("poll sent row %s %d times", id, c)
		}
		if markedByCmd[id] {
			t.Errorf("row %s, marked published by mark-published, was sent again by poll", id)
		}
	}
	dups := 0
	for _, c := range got {
		if c > 1 {
			dups++
		}
	}
	t.Logf("seed %d: %d good, %d bad, %d too-large rows; %d records on %s (%d rows more than once), %d replayed, %d from poll",
		seed, len(good), len(bad), len(large), len(main), f.Topic, dups, len(replayed), len(polled))
}

// started waits until p has logged line (a SIGTERM before it is not a stop this test means).
func started(t *testing.T, p *testenv.Proc, line string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "cdc-relay to log "+line, func() bool { return strings.Contains(p.Output(), line) })
}

// tallyLine returns the tally a dead-letters command printed ("replayed ...", "discarded ...").
func tallyLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "replayed ") && strings.Contains(l, ", refused ") || strings.HasPrefix(l, "discarded ") && strings.Contains(l, ", skipped ") {
			return l
		}
	}
	return strings.TrimSpace(out)
}
