package e2e

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// The seeds TestSwitchingPublishersAsProperties runs: 1 to -switch.n, or -switch.seed alone.
var switchN = flag.Int("switch.n", 20, "seeds 1..N that TestSwitchingPublishersAsProperties runs")

var switchSeed = flag.Uint64("switch.seed", 0, "run only this seed of TestSwitchingPublishersAsProperties")

// Switching publishers as properties: `cutover` (polling to the relay) and `outbox mark-published`
// (the relay back to polling), over seeded schedules against the real PostgreSQL and Kafka, with
// a service writing two-row transactions throughout. A schedule starts with the poller and
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
//     before that cutover; the poller after mark-published never sends a row it marked.
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

// phase returns the records the phase that just ended sent (every publisher is stopped), and
// checks that every row marked published is on Kafka.
func (s *switchRun) phase(name string) []*kgo.Record {
	t := s.t
	t.Helper()
	recs := caughtUp(t, s.cons, s.f.Topic)
	seg := recs[s.seen:]
	s.seen = len(recs)
	for _, r := range seg {
		s.sent[testenv.Header(r, "outbox-id")]++
	}
	for id := range idSet(t, s.f, `published_at IS NOT NULL`) {
		if s.sent[id] == 0 {
			s.violated("marked, not on Kafka", "after %s: row %s is marked published but is not on Kafka: the poller will never send it", name, id)
		}
	}
	s.step("%s: %d records", name, len(seg))
	return seg
}

// wait gives the schedule's random moment for a SIGTERM; it is the schedule's choice, not a wait
// for a condition.
func (s *switchRun) wait(maxMS int) time.Duration {
	d := time.Duration(s.rng.IntN(maxMS)) * time.Millisecond
	time.Sleep(d)
	return d
}

// poll runs the poller once, ending in a kill -9 after a batch's acknowledgement or a SIGTERM.
func (s *switchRun) poll() []*kgo.Record {
	t := s.t
	args := []string{"poll", "--table", s.f.Table, "--dlq-topic", s.f.DLQ, "--interval", "20ms", "--batch", strconv.Itoa(switchPollBatch)}
	if s.rng.IntN(2) == 0 {
		k := 1 + s.rng.IntN(4)
		p := testenv.Start(t, s.bin, []string{fmt.Sprintf("CDC_RELAY_TEST_CRASH_AFTER_BATCHES=%d", k)}, args...)
		if _, sig := p.Wait(t, 120*time.Second); sig != syscall.SIGKILL {
			t.Fatalf("the poller was not killed by the crash hook (signal %v):\n%s", sig, p.Output())
		}
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
// and the records it sent.
func (s *switchRun) cutover() (markedBefore map[string]bool, sent []*kgo.Record) {
	t := s.t
	markedBefore = idSet(t, s.f, `published_at IS NOT NULL`)
	args := []string{"cutover", "--table", s.f.Table, "--dlq-topic", s.f.DLQ, "--batch", strconv.Itoa(switchCutoverBatch)}
	for attempt := 0; ; attempt++ {
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
		code, sig := p.Wait(t, 120*time.Second)
		killed := sig == syscall.SIGKILL
		if !killed && code != 0 {
			t.Fatalf("cutover: exit %d (signal %v):\n%s", code, sig, p.Output())
		}
		name := "cutover"
		if k > 0 {
			name = fmt.Sprintf("cutover with a kill -9 after batch %d (killed: %v)", k, killed)
		}
		seg := s.phase(name)
		sent = append(sent, seg...)
		again := map[string]int{}
		for _, r := range seg {
			id := testenv.Header(r, "outbox-id")
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
func (s *switchRun) relay() []*kgo.Record {
	t := s.t
	args := []string{"run", "--dlq-topic", s.f.DLQ, "--status-interval", "1s", "--metrics-addr", ""}
	if s.rng.IntN(2) == 0 {
		k := 2 + s.rng.IntN(10)
		p := testenv.Start(t, s.bin, append(append([]string{}, s.env...), fmt.Sprintf("CDC_RELAY_TEST_CRASH_AFTER_CONFIRMS=%d", k)), args...)
		if _, sig := p.Wait(t, 120*time.Second); sig != syscall.SIGKILL {
			t.Fatalf("the relay was not killed by the crash hook (signal %v):\n%s", sig, p.Output())
		}
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
	s := &switchRun{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x737769)), f: f, bin: bin,
		env:  []string{"CDC_RELAY_SLOT=" + f.Slot, "CDC_RELAY_PUBLICATION=" + f.Publication},
		cons: testenv.Consume(t, f.Topic), sent: map[string]int{}, broken: map[string]int{},
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
	w := startWriter(t, f, 5*time.Millisecond)
	s.wait(300) // a backlog for the first publisher

	switches := 1 + s.rng.IntN(3)
	polling := true
	var cutoverSent, markedByCutover []string // what the last cutover sent, and what was marked before it
	var marked map[string]bool                // what the last mark-published marked
	final := func() {}
	for sw := 0; sw <= switches; sw++ {
		last := sw == switches
		if polling {
			for range 1 + s.rng.IntN(2) {
				for _, r := range s.poll() {
					if id := testenv.Header(r, "outbox-id"); marked[id] {
						s.violated("poller sent a marked row", "the poller sent row %s, which mark-published marked", id)
					}
				}
			}
			if last {
				final = func() {
					p := testenv.Start(t, bin, nil, "poll", "--table", f.Table, "--dlq-topic", f.DLQ, "--interval", "20ms")
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
			before, sent := s.cutover()
			cutoverSent, markedByCutover = cutoverSent[:0], markedByCutover[:0]
			for _, r := range sent {
				cutoverSent = append(cutoverSent, testenv.Header(r, "outbox-id"))
			}
			for id := range before {
				markedByCutover = append(markedByCutover, id)
			}
			polling = false
			continue
		}
		relayCheck := func(recs []*kgo.Record) {
			for _, r := range recs {
				id := testenv.Header(r, "outbox-id")
				if slices.Contains(cutoverSent, id) {
					s.violated("relay sent the cutover's row", "the relay sent row %s, which the cutover before it sent", id)
				}
				if slices.Contains(markedByCutover, id) {
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
	}
	committed := w.Stop(t)
	final()
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
