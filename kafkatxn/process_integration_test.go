package kafkatxn

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// childEnv names the variable that makes TestProducerProcess the child the tests below run:
// slot, checkpoint topic and data topic, separated by spaces.
const childEnv = "CDC_RELAY_TXN_CHILD"

// childRecords is how many records each of the child's transactions holds.
const childRecords = 20

// fencedExit is the child's exit code when its producer was fenced.
const fencedExit = 3

// TestProducerProcess is not a test: it is the producer process that the tests below pause
// and kill. It commits transaction after transaction (childRecords records valued "n/i", and
// the checkpoint at position n), printing "committed n" after each, until an error ends it.
func TestProducerProcess(t *testing.T) {
	spec := strings.Fields(os.Getenv(childEnv))
	if len(spec) != 3 {
		t.Skip("the child process of the pause and kill tests (" + childEnv + " not set)")
	}
	err := commitUntilError(t, Config{Slot: spec[0], CheckpointTopic: spec[1], TransactionTimeout: 20 * time.Second}, spec[2])
	fmt.Printf("stopped: %v\n", err)
	if IsFenced(err) {
		os.Exit(fencedExit)
	}
	os.Exit(1)
}

// commitUntilError is the child's loop; it returns the error that ended it.
func commitUntilError(t *testing.T, cfg Config, topic string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(testenv.Brokers(t)...)}, cfg.ClientOpts()...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := context.Background()
	p, err := New(ctx, cl, cfg)
	if err != nil {
		return err
	}
	cp := Checkpoint{Slot: cfg.Slot}
	for n := 1; ; n++ {
		cp.Position++ // the checkpoint of transaction n is at position n
		if err := p.Begin(); err != nil {
			return err
		}
		for i := range childRecords {
			p.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("child"), Value: fmt.Appendf(nil, "%d/%d", n, i)}, nil)
		}
		// The records are not awaited one by one, as Commit's contract asks: here only a fence
		// fails them, and then the checkpoint's produce in Commit fails too.
		if err := p.Commit(ctx, cp); err != nil {
			return err
		}
		fmt.Printf("committed %d\n", n)
	}
}

// startChild runs TestProducerProcess for s and waits until it committed a few transactions.
func (s *realSlot) startChild(t *testing.T) *testenv.Proc {
	t.Helper()
	child := testenv.Start(t, os.Args[0], []string{childEnv + "=" + s.cfg.Slot + " " + s.cfg.CheckpointTopic + " " + s.topic},
		"-test.run=^TestProducerProcess$", "-test.count=1")
	testenv.Eventually(t, 60*time.Second, "the child commits 5 transactions", func() bool {
		return lastCommitted(child.Output()) >= 5
	})
	return child
}

var committedLine = regexp.MustCompile(`(?m)^committed (\d+)$`)

// lastCommitted is the newest transaction the child said it committed.
func lastCommitted(output string) int {
	last := 0
	for _, m := range committedLine.FindAllStringSubmatch(output, -1) {
		n, _ := strconv.Atoi(m[1])
		last = max(last, n)
	}
	return last
}

// childTransactions is what a read_committed consumer sees of the child's transactions:
// records per transaction number.
func (s *realSlot) childTransactions(t *testing.T) map[int]int {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "no open transaction in "+s.topic, func() bool { return !s.openTransactions(t) })
	seen := map[int]int{}
	s.read(t, func(r *kgo.Record) {
		n, _, _ := strings.Cut(string(r.Value), "/")
		i, _ := strconv.Atoi(n)
		seen[i]++
	})
	return seen
}

// wantExactlyUpTo fails unless the child's transactions 1..last are visible whole and no
// later one is visible at all.
func wantExactlyUpTo(t *testing.T, what string, seen map[int]int, last int) {
	t.Helper()
	for n := 1; n <= last; n++ {
		if seen[n] != childRecords {
			t.Fatalf("%s: transaction %d (covered by checkpoint %d) shows %d of its %d records", what, n, last, seen[n], childRecords)
		}
	}
	for n, c := range seen {
		if n > last {
			t.Fatalf("%s: transaction %d, after the checkpoint's %d, shows %d records", what, n, last, c)
		}
	}
}

// A relay paused mid-transaction (SIGSTOP: a GC pause, a frozen VM, a relay paused past
// wal_sender_timeout) while another takes its slot is a zombie: when it resumes it is fenced
// and stops, and publishes nothing more. What read_committed consumers see is exactly what
// the checkpoint the new holder reads covers, before and after the zombie resumes.
func TestPausedProducerResumesFencedAndPublishesNothing(t *testing.T) {
	s := newRealSlot(t)
	zombie := s.startChild(t)
	if err := syscall.Kill(zombie.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	s.producer(t) // the new holder takes the transactional id
	cp, ok := s.checkpoint(t)
	if !ok {
		t.Fatal("no checkpoint after the child committed")
	}
	last := int(cp.Position)
	wantExactlyUpTo(t, "the zombie paused", s.childTransactions(t), last)

	if err := syscall.Kill(zombie.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	code, _ := zombie.Wait(t, 60*time.Second)
	out := zombie.Output()
	// Kafka answers the zombie's commit PRODUCER_FENCED, or, when the commit races the new
	// holder's epoch bump under transactions version 2, INVALID_TXN_STATE (KAFKA-20785): a
	// refused commit, which stops the zombie as surely. What it published is checked below.
	fencedOut := code == fencedExit && strings.Contains(out, "another relay holds this slot's transactional id")
	refusedOut := code == 1 && strings.Contains(out, "INVALID_TXN_STATE")
	if !fencedOut && !refusedOut {
		t.Fatalf("the resumed zombie exited %d, want %d with the fence error (or 1 with INVALID_TXN_STATE); output:\n%s", code, fencedExit, out)
	}
	if n := lastCommitted(out); n > last {
		t.Fatalf("the zombie says it committed transaction %d, after the new holder's checkpoint %d", n, last)
	}
	wantExactlyUpTo(t, "the zombie resumed and stopped", s.childTransactions(t), last)
	if got, _ := s.checkpoint(t); got != cp {
		t.Fatalf("the zombie moved the checkpoint from %+v to %+v", cp, got)
	}
	t.Logf("the zombie, paused after committing %d transactions, resumed and stopped: %s", last, strings.TrimSpace(out[strings.LastIndex(out, "stopped:"):]))
}

// A producer killed with SIGKILL mid-stream leaves at most one transaction open; the next
// holder aborts it, and the checkpoint it reads covers exactly what read_committed shows.
func TestKilledProducerLeavesExactlyItsCommittedTransactions(t *testing.T) {
	s := newRealSlot(t)
	child := s.startChild(t)
	if err := syscall.Kill(child.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait(t, 30*time.Second)
	said := lastCommitted(child.Output())

	s.producer(t)
	cp, ok := s.checkpoint(t)
	if !ok {
		t.Fatal("no checkpoint after the child committed")
	}
	last := int(cp.Position)
	// The child may have been killed after Kafka committed and before it printed.
	if last < said || last > said+1 {
		t.Fatalf("the checkpoint covers transaction %d; the child said it committed %d", last, said)
	}
	wantExactlyUpTo(t, "after the kill", s.childTransactions(t), last)
}
