package e2e

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// The seeds TestSwitchingPublishersAsProperties runs: 1 to -switch.n, or -switch.seed alone.
var switchN = flag.Int("switch.n", 20, "seeds 1..N that TestSwitchingPublishersAsProperties runs")

var switchSeed = flag.Uint64("switch.seed", 0, "run only this seed of TestSwitchingPublishersAsProperties")

// Switching publishers as properties: `cutover` (polling to the relay), `outbox mark-published`
// (the relay back to polling) and `dead-letters replay`, over seeded schedules against the real
// PostgreSQL and Kafka, with a service writing two-row transactions throughout and, now and
// then, a row too large for its topic (every publisher dead-letters it). A schedule starts with the poller and
// switches one to three times; each publisher runs once or twice, each run ending in a kill -9
// (the poller between Kafka's acknowledgement and its mark, the relay between the
// acknowledgement and its confirmation) or a SIGTERM at a random moment; a cutover is sometimes
// killed -9 between a batch's acknowledgement and its mark, and then redone as docs/operations.md
// says (slot drop, cutover again). Checked:
//   - every committed row reaches Kafka (at the end, after the last publisher caught up);
//   - after every run and command, every row marked published is on Kafka: the poller will
//     never send it, so a wrong mark is a loss;
//   - mark-published leaves pending no row the relay delivered in a transaction before the slot's
//     confirmed position (its cdc-lsn below it): the poller would send it again for nothing;
//   - neither command sends a row twice: a cutover sends each row at most once, never one marked
//     before it began, and again only what the publisher before it had sent without marking (at
//     most one batch); the relay never sends a row the cutover before it sent, nor one marked
//     before that cutover; the poller after mark-published never sends a row it marked;
//   - `dead-letters replay --all`, between phases, sends nothing while the too-large rows' topic
//     still refuses them; once its limit is raised (at the end) the replays send every
//     too-large row, once for each event its letters are (once for all the relay's letters of
//     it, once for the poller's and cutover's), and the last replay sends nothing.
//
// A failing seed prints its schedule and the command that runs it alone; -switch.n=N runs N.
func TestSwitchingPublishersAsProperties(t *testing.T) {
	t.Parallel()
	seeds := []uint64{*switchSeed}
	if *switchSeed == 0 {
		seeds = seeds[:0]
		for i := range uint64(max(*switchN, 0)) {
			seeds = append(seeds, 1+i)
		}
	}
	bin := testenv.Binary(t, false)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			switchSchedule(t, bin, seed)
		})
	}
}

// The batches of the poller and the cutover: small, so that a kill -9 after a batch's
// acknowledgement comes early in a run.
const (
	switchPollBatch    = 10
	switchCutoverBatch = 5
)

// switchRun is the state of one schedule.
type switchRun struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	f    *testenv.Fixture
	bin  string
	env  []string
	cons *testenv.Consumer

	// Rows too large for their topic (its max.message.bytes is 2 KiB until the end): every
	// publisher dead-letters them, and `dead-letters replay` sends them once the limit is raised.
	small              string
	smallCons, dlqCons *testenv.Consumer
	dlEnv              []string
	large              []int64

	steps  []string
	seen   int            // records of the topic read at the end of the last phase
	sent   map[string]int // records per outbox id so far
	broken map[string]int // violations per property
}

// violated reports a violation of property, the first five of each in full.
func (s *switchRun) violated(property, format string, args ...any) {
	s.t.Helper()
	s.broken[property]++
	if n := s.broken[property]; n <= 5 {
		s.t.Errorf(format, args...)
	} else if n == 6 {
		s.t.Errorf("(more rows break %q: counted at the end)", property)
	}
}

func (s *switchRun) step(format string, args ...any) {
	s.steps = append(s.steps, fmt.Sprintf(format, args...))
}

// phase returns the outbox ids of the records the phase that just ended sent to the outbox
// topic, one per record (every publisher is stopped), and checks that every row marked published is on Kafka (that topic, the too-large
// rows' topic or the dead-letter topic).
func (s *switchRun) phase(name string) []string {
	t := s.t
	t.Helper()
	recs := caughtUp(t, s.cons, s.f.Topic)
	var seg []string
	for _, r := range recs[s.seen:] {
		id := testenv.Header(r, "outbox-id")
		seg = append(seg, id)
		s.sent[id]++
	}
	s.seen = len(recs)
	elsewhere := ids(append(caughtUp(t, s.smallCons, s.small), caughtUp(t, s.dlqCons, s.f.DLQ)...))
	for id := range idSet(t, s.f, `published_at IS NOT NULL`) {
		if s.sent[id] == 0 && elsewhere[id] == 0 {
			s.violated("marked, not on Kafka", "after %s: row %s is marked published but is not on Kafka: the poller will never send it", name, id)
		}
	}
	s.step("%s: %d records", name, len(seg))
	return seg
}

// maybeLarge commits, one time in three, a row too large for its topic before a publisher runs.
func (s *switchRun) maybeLarge() {
	if s.rng.IntN(3) == 0 {
		s.large = append(s.large, s.f.Insert(s.t, false, testenv.Row{Key: "big", Topic: s.small, Payload: `{"pad": "` + strings.Repeat("x", 4096) + `"}`})...)
		s.step("a row too large for %s", s.small)
	}
}

// replay runs `dead-letters replay --all` and returns its tally line.
func (s *switchRun) replay() string {
	t := s.t
	out, code := dlCLI(t, s.bin, s.dlEnv, "replay", "--all")
	if code != 0 && code != 1 {
		t.Fatalf("dead-letters replay --all: exit %d", code)
	}
	s.phase("dead-letters replay: " + tallyLine(out))
	return out
}

// maybeReplay runs `dead-letters replay --all` one time in three between phases. While the
// too-large rows' topic keeps its limit, it must refuse their letters and send nothing.
func (s *switchRun) maybeReplay() {
	if s.rng.IntN(3) == 0 {
		if out := s.replay(); !strings.Contains(out, "replayed 0,") {
			s.violated("replayed a letter still too large", "dead-letters replay sent a letter while its topic's limit still refuses it: %s", tallyLine(out))
		}
	}
}

// replayToTheEnd raises the too-large rows' topic's limit and replays until nothing is refused,
// then once more, which must send nothing; every too-large row must then be on its topic, sent
// once by the replays.
func (s *switchRun) replayToTheEnd() {
	t := s.t
	testenv.SetTopicConfig(t, s.small, "max.message.bytes", "1048576")
	s.step("raise %s's max.message.bytes", s.small)
	// The raised limit may take a moment to show in DescribeConfigs.
	testenv.Eventually(t, 60*time.Second, "a replay with nothing refused", func() bool { return strings.Contains(s.replay(), ", refused 0") })
	if out := s.replay(); !strings.Contains(out, "replayed 0, refused 0") {
		s.violated("replayed twice", "the last replay sent something: %s", tallyLine(out))
	}
	replayed := map[string]int{}
	for _, r := range caughtUp(t, s.smallCons, s.small) {
		if testenv.Header(r, "cdc-replayed-at") != "" {
			replayed[testenv.Header(r, "outbox-id")]++
		}
	}
	// A letter is one event with the others of its source, outbox id, topic, cdc-lsn, key and
	// value (DESIGN.md, "Cutover trusts the slot's exported snapshot"): a row the relay parked and
	// then, mark-published having left it pending (the relay's replay window), the poller parked
	// again is two events, the poller's having no cdc-lsn, and goes twice.
	events := map[string]map[string]bool{} // outbox id -> the cdc-lsn of its letters
	for _, r := range caughtUp(t, s.dlqCons, s.f.DLQ) {
		id := testenv.Header(r, "outbox-id")
		if events[id] == nil {
			events[id] = map[string]bool{}
		}
		events[id][testenv.Header(r, "cdc-lsn")] = true
	}
	for _, id := range s.large {
		k := strconv.FormatInt(id, 10)
		if n := replayed[k]; n < 1 || n > len(events[k]) {
			s.violated("replayed twice", "too-large row %d: %d records from dead-letters replay on %s, want 1 for each of its %d events on %s", id, n, s.small, len(events[k]), s.f.DLQ)
		}
	}
}

// wait gives the schedule's random moment for a SIGTERM; it is the schedule's choice, not a wait
// for a condition.
func (s *switchRun) wait(maxMS int) time.Duration {
	d := time.Duration(s.rng.IntN(maxMS)) * time.Millisecond
	time.Sleep(d)
	return d
}

// poll runs the poller once, ending in a kill -9 after a batch's acknowledgement or a SIGTERM.
func (s *switchRun) poll() []string {
	t := s.t
	s.maybeLarge()
	args := []string{"poll", "--table", s.f.Table, "--dlq-topic", s.f.DLQ, "--interval", "20ms", "--batch", strconv.Itoa(switchPollBatch)}
	if s.rng.IntN(2) == 0 {
		k := 1 + s.rng.IntN(4)
		p := testenv.Start(t, s.bin, []string{fmt.Sprintf("CDC_RELAY_TEST_CRASH_AFTER_BATCHES=%d", k)}, args...)
		p.WaitKilled(t, 120*time.Second)
		return s.phase(fmt.Sprintf("poll, kill -9 after batch %d", k))
	}
	p := testenv.Start(t, s.bin, nil, args...)
	started(t, p, "msg=polling")
	d := s.wait(600)
	if code := p.Stop(t); code != 0 {
		t.Fatalf("poll: exit %d after SIGTERM:\n%s", code, p.Output())
	}
	return s.phase(fmt.Sprintf("poll, SIGTERM after %s", d))
}

// cutover runs `cutover`, sometimes killed -9 between a batch's acknowledgement and its mark and
// then redone (slot drop, cutover again). It returns the rows marked published before it began
// and the outbox ids of the records it sent.
func (s *switchRun) cutover() (markedBefore map[string]bool, sent []string) {
	t := s.t
	markedBefore = idSet(t, s.f, `published_at IS NOT NULL`)
	args := []string{"cutover", "--table", s.f.Table, "--dlq-topic", s.f.DLQ, "--batch", strconv.Itoa(switchCutoverBatch)}
	for attempt := 0; ; attempt++ {
		s.maybeLarge()
		before := maps.Clone(s.sent)
		if attempt > 0 {
			markedBefore = idSet(t, s.f, `published_at IS NOT NULL`)
		}
		var env []string
		k := 0
		if attempt == 0 && s.rng.IntN(3) == 0 {
			k = 1 + s.rng.IntN(3)
			env = []string{fmt.Sprintf("CDC_RELAY_TEST_CRASH_AFTER_BATCHES=%d", k)}
		}
		p := testenv.Start(t, s.bin, append(append([]string{}, s.env...), env...), args...)
		code, _ := p.Wait(t, 120*time.Second)
		killed := p.Killed()
		if !killed && code != 0 {
			t.Fatalf("cutover: exit %d:\n%s", code, p.Output())
		}
		name := "cutover"
		if k > 0 {
			name = fmt.Sprintf("cutover with a kill -9 after batch %d (killed: %v)", k, killed)
		}
		seg := s.phase(name)
		sent = append(sent, seg...)
		again := map[string]int{}
		for _, id := range seg {
			again[id]++
			switch {
			case again[id] > 1:
				s.violated("cutover sent twice", "%s sent row %s twice", name, id)
			case markedBefore[id]:
				s.violated("cutover sent a marked row", "%s sent row %s, marked published before it began", name, id)
			}
		}
		resent := 0
		for id := range again {
			if before[id] > 0 {
				resent++
			}
		}
		s.step("%s sent %d rows again that a publisher before it had sent and not marked", name, resent)
		if !killed {
			return markedBefore, sent
		}
		s.f.SlotReleased(t, 30*time.Second)
		if out, errOut, code := testenv.Run(t, 60*time.Second, s.bin, s.env, "slot", "drop"); code != 0 {
			t.Fatalf("slot drop after the killed cutover: exit %d\n%s%s", code, out, errOut)
		}
	}
}

// relay runs the relay once, ending in a kill -9 before a confirmation or a SIGTERM.
func (s *switchRun) relay() []string {
	t := s.t
	s.maybeLarge()
	args := []string{"run", "--dlq-topic", s.f.DLQ, "--status-interval", "1s", "--metrics-addr", ""}
	if s.rng.IntN(2) == 0 {
		k := 2 + s.rng.IntN(10)
		p := testenv.Start(t, s.bin, append(append([]string{}, s.env...), fmt.Sprintf("CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=%d", k)), args...)
		p.WaitKilled(t, 120*time.Second)
		return s.phase(fmt.Sprintf("relay, kill -9 before confirmation %d", k))
	}
	p := testenv.Start(t, s.bin, s.env, args...)
	started(t, p, "msg=streaming")
	d := s.wait(800)
	if code := p.Stop(t); code != 0 {
		t.Fatalf("relay: exit %d after SIGTERM:\n%s", code, p.Output())
	}
	return s.phase(fmt.Sprintf("relay, SIGTERM after %s", d))
}

// markPublished runs `outbox mark-published` (the relay stopped), checks what it left pending
// against the slot's confirmed position, drops the slot (the next cutover creates it again) and
// returns the rows it marked.
func (s *switchRun) markPublished() map[string]bool {
	t := s.t
	s.f.SlotReleased(t, 30*time.Second)
	confirmed := s.f.SlotConfirmed(t)
	markedBefore := idSet(t, s.f, `published_at IS NOT NULL`)
	out, errOut, code := testenv.Run(t, 90*time.Second, s.bin, s.env, "outbox", "mark-published", "--table", s.f.Table)
	if code != 0 {
		t.Fatalf("outbox mark-published: exit %d\n%s%s", code, out, errOut)
	}
	s.phase("mark-published")
	// The relay's records of the rows left pending: each must be of a transaction at or after
	// the confirmed position, which the next session would have replayed.
	lsns := map[string]string{} // outbox id -> cdc-lsn of its first record from the relay
	for _, r := range s.cons.Records() {
		if lsn, id := testenv.Header(r, "cdc-lsn"), testenv.Header(r, "outbox-id"); lsn != "" && lsns[id] == "" {
			lsns[id] = lsn
		}
	}
	left := 0
	for id := range idSet(t, s.f, `published_at IS NULL`) {
		if lsn, ok := lsns[id]; ok {
			left++
			if lsnLess(t, lsn, confirmed.String()) {
				s.violated("confirmed, left pending", "mark-published left row %s pending, which the relay delivered at %s, before the slot's confirmed position %s: the poller will send it again for nothing", id, lsn, confirmed)
			}
		}
	}
	marked := map[string]bool{}
	for id := range idSet(t, s.f, `published_at IS NOT NULL`) {
		if !markedBefore[id] {
			marked[id] = true
		}
	}
	s.step("mark-published at %s: %d marked, %d delivered rows left pending", confirmed, len(marked), left)
	if out, errOut, code := testenv.Run(t, 60*time.Second, s.bin, s.env, "slot", "drop"); code != 0 {
		t.Fatalf("slot drop: exit %d\n%s%s", code, out, errOut)
	}
	return marked
}

func switchSchedule(t *testing.T, bin string, seed uint64) {
	f := testenv.NewFixture(t)
	if out, errOut, code := testenv.Run(t, 30*time.Second, bin, nil, "poll", "--create-index", "--table", f.Table); code != 0 {
		t.Fatalf("poll --create-index: exit %d\n%s%s", code, out, errOut)
	}
	small, marks := f.LimitedTopic(t, "small", "2048"), "public."+f.Name+"_marks"
	t.Cleanup(func() { _, _ = f.Pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+marks) })
	s := &switchRun{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x737769)), f: f, bin: bin,
		env:  f.SlotEnv(),
		cons: testenv.Consume(t, f.Topic), sent: map[string]int{}, broken: map[string]int{},
		small: small, smallCons: testenv.Consume(t, small), dlqCons: testenv.Consume(t, f.DLQ),
		dlEnv: []string{"CDC_RELAY_DLQ_TOPIC=" + f.DLQ, "CDC_RELAY_MARKS_TABLE=" + marks},
	}
	defer func() {
		if t.Failed() {
			if len(s.broken) > 0 {
				t.Logf("seed %d: rows breaking each property: %v", seed, s.broken)
			}
			t.Logf("seed %d schedule (go test ./e2e -run 'TestSwitchingPublishersAsProperties/seed=%d$' -switch.seed=%d replays it):\n  %s",
				seed, seed, seed, strings.Join(s.steps, "\n  "))
		}
	}()
	w := startWriter(t, f, 20*time.Millisecond)
	s.wait(300) // a backlog for the first publisher

	switches := 1 + s.rng.IntN(3)
	polling := true
	var cutoverSent, markedByCutover map[string]bool // what the last cutover sent, and what was marked before it
	var marked map[string]bool                       // what the last mark-published marked
	final := func() {}
	for sw := 0; sw <= switches; sw++ {
		last := sw == switches
		if polling {
			for range 1 + s.rng.IntN(2) {
				for _, id := range s.poll() {
					if marked[id] {
						s.violated("poller sent a marked row", "the poller sent row %s, which mark-published marked", id)
					}
				}
			}
			if last {
				final = func() {
					p := testenv.Start(t, bin, nil, "poll", "--table", f.Table, "--dlq-topic", f.DLQ, "--interval", "20ms")
					// Every row may be marked already (the wait below then ends at once): wait
					// for the poller to start, or the SIGTERM reaches it before its handler.
					started(t, p, "msg=polling")
					testenv.Eventually(t, 60*time.Second, "the poller to publish every pending row", func() bool {
						return len(idSet(t, f, `published_at IS NULL`)) == 0
					})
					if code := p.Stop(t); code != 0 {
						t.Fatalf("poll: exit %d after SIGTERM:\n%s", code, p.Output())
					}
					s.phase("poll to the end")
				}
				break
			}
			var sent []string
			markedByCutover, sent = s.cutover()
			cutoverSent = map[string]bool{}
			for _, id := range sent {
				cutoverSent[id] = true
			}
			polling = false
			s.maybeReplay()
			continue
		}
		relayCheck := func(sent []string) {
			for _, id := range sent {
				if cutoverSent[id] {
					s.violated("relay sent the cutover's row", "the relay sent row %s, which the cutover before it sent", id)
				}
				if markedByCutover[id] {
					s.violated("relay sent a row marked before the cutover", "the relay sent row %s, marked published before the cutover", id)
				}
			}
		}
		for range 1 + s.rng.IntN(2) {
			relayCheck(s.relay())
		}
		if last {
			final = func() {
				re := &testenv.RelayEnv{F: f, Bin: bin, Env: s.env}
				p := re.Start(t, nil, "--metrics-addr", "")
				started(t, p, "msg=streaming")
				re.Settle(t, s.cons, f.CurrentWAL(t))
				if code := p.Stop(t); code != 0 {
					t.Fatalf("relay: exit %d after SIGTERM:\n%s", code, p.Output())
				}
				relayCheck(s.phase("relay to the end"))
			}
			break
		}
		marked = s.markPublished()
		polling = true
		s.maybeReplay()
	}
	committed := w.Stop(t)
	final()
	s.replayToTheEnd()
	for _, id := range committed {
		if s.sent[strconv.FormatInt(id, 10)] == 0 {
			s.violated("lost", "committed row %d never reached Kafka", id)
		}
	}
	dups := 0
	for _, n := range s.sent {
		if n > 1 {
			dups++
		}
	}
	t.Logf("seed %d: %d rows committed, %d records, %d rows more than once; %s", seed, len(committed), s.seen, dups, strings.Join(s.steps, "; "))
}
