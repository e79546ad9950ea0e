package kafkatxn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// realSlot is one test's slot on the real broker (scripts/dev-up.sh): a data topic, a
// checkpoint topic made by EnsureCheckpointTopic, and the producers' configuration, all
// named from the test and removed at cleanup.
type realSlot struct {
	cfg   Config
	topic string
	opts  []kgo.Opt // seed brokers
}

func newRealSlot(t testing.TB) *realSlot {
	t.Helper()
	n := testenv.Name(t)
	s := &realSlot{
		cfg:   Config{Slot: n, CheckpointTopic: n + ".checkpoints", TransactionTimeout: 20 * time.Second},
		topic: n + ".events",
		opts:  []kgo.Opt{kgo.SeedBrokers(testenv.Brokers(t)...)},
	}
	testenv.CreateTopic(t, s.topic, 3)
	adm := testenv.Kafka(t)
	if err := EnsureCheckpointTopic(ctx(t), adm, s.cfg.CheckpointTopic, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(adm).DeleteTopics(c, s.cfg.CheckpointTopic)
	})
	return s
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// producer starts a producer of the slot: its New fences every earlier one. Its client is
// closed at cleanup unless the test closes it first (a crash).
func (s *realSlot) producer(t testing.TB) *Producer {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, s.opts...), s.cfg.ClientOpts()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	p, err := New(ctx(t), cl, s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// produce puts n records of key into the open transaction and waits for their
// acknowledgements, as the relay's tracker does before it commits.
func (s *realSlot) produce(t testing.TB, p *Producer, key string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		p.Produce(ctx(t), &kgo.Record{Topic: s.topic, Key: []byte(key), Value: fmt.Appendf(nil, "%s-%d", key, i)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("produce in the transaction: %v", err)
	}
}

// committed is what a read_committed consumer sees in the data topic, by key, once no
// transaction is open: the commit markers are written after EndTxn answers, so a read right
// after a commit may end before them.
func (s *realSlot) committed(t testing.TB) map[string]int {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "no open transaction in "+s.topic, func() bool { return !s.openTransactions(t) })
	return s.visible(t)
}

// visible is what a read_committed consumer sees now, by key.
func (s *realSlot) visible(t testing.TB) map[string]int {
	t.Helper()
	seen := map[string]int{}
	s.read(t, func(r *kgo.Record) { seen[string(r.Key)]++ })
	return seen
}

// read calls each for every record a read_committed consumer sees now in the data topic.
func (s *realSlot) read(t testing.TB, each func(*kgo.Record)) {
	t.Helper()
	if err := readCommitted(ctx(t), s.opts, s.topic, toStableOffset, each); err != nil {
		t.Fatal(err)
	}
}

// openTransactions says whether a transaction holds the data topic's last stable offset below
// its high watermark: records neither committed nor aborted yet.
func (s *realSlot) openTransactions(t testing.TB) bool {
	t.Helper()
	return openTransactions(t, s.topic)
}

func openTransactions(t testing.TB, topic string) bool {
	t.Helper()
	adm := kadm.NewClient(testenv.Kafka(t))
	stable, err := adm.ListCommittedOffsets(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	open := false
	end.Each(func(o kadm.ListedOffset) {
		if st, ok := stable.Lookup(o.Topic, o.Partition); !ok || st.Offset != o.Offset {
			open = true
		}
	})
	return open
}

// checkpoint is what ReadCheckpoint returns once the checkpoint topic has no open
// transaction (the markers of a commit are written after it answered).
func (s *realSlot) checkpoint(t testing.TB) (Checkpoint, bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "no open transaction in "+s.cfg.CheckpointTopic, func() bool { return !openTransactions(t, s.cfg.CheckpointTopic) })
	cp, ok, err := ReadCheckpoint(ctx(t), s.opts, s.cfg.CheckpointTopic, s.cfg.Slot)
	if err != nil {
		t.Fatal(err)
	}
	return cp, ok
}

func wantSeen(t testing.TB, what string, got, want map[string]int) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: a read_committed consumer sees %v, want %v", what, got, want)
	}
}

// wantCheckpoint fails unless the slot's checkpoint is want.
func (s *realSlot) wantCheckpoint(t testing.TB, what string, want Checkpoint) {
	t.Helper()
	if got, ok := s.checkpoint(t); !ok || got != want {
		t.Fatalf("%s: the checkpoint is %+v (found %v), want %+v", what, got, ok, want)
	}
}

// wantState fails unless a read_committed consumer sees seen (once no transaction is open)
// and the slot's checkpoint is cp.
func (s *realSlot) wantState(t testing.TB, what string, seen map[string]int, cp Checkpoint) {
	t.Helper()
	wantSeen(t, what, s.committed(t), seen)
	s.wantCheckpoint(t, what, cp)
}

// commit runs one transaction of p: n acknowledged records of key, then cp.
func (s *realSlot) commit(t testing.TB, p *Producer, key string, n int, cp Checkpoint) {
	t.Helper()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	s.produce(t, p, key, n)
	if err := p.Commit(ctx(t), cp); err != nil {
		t.Fatalf("commit of %d records of %s: %v", n, key, err)
	}
}

// leaveOpen begins a transaction of p with n acknowledged records of key and, when cp is
// not nil, cp's checkpoint record, all acknowledged, and leaves it open.
func (s *realSlot) leaveOpen(t testing.TB, p *Producer, key string, n int, cp *Checkpoint) {
	t.Helper()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	s.produce(t, p, key, n)
	if cp == nil {
		return
	}
	rec, err := p.checkpointRecord(*cp)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Client().ProduceSync(ctx(t), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Commit makes the transaction's records and its checkpoint visible to read_committed
// together; before it, neither is.
func TestCommitShowsRecordsAndCheckpointTogether(t *testing.T) {
	s := newRealSlot(t)
	p := s.producer(t)
	if _, ok := s.checkpoint(t); ok {
		t.Fatal("a new slot has a checkpoint")
	}
	s.leaveOpen(t, p, "a", 50, nil)
	wantSeen(t, "records acknowledged, transaction open", s.visible(t), map[string]int{})
	cp := Checkpoint{Slot: s.cfg.Slot, Position: 0x1000, Split: Split{LSN: 0x2000, Records: 50}, SystemID: "7", Timeline: 1}
	if err := p.Commit(ctx(t), cp); err != nil {
		t.Fatal(err)
	}
	s.wantState(t, "committed", map[string]int{"a": 50}, cp)

	// The next transaction's checkpoint replaces it; the protocol v2 epoch bump of each
	// commit does not disturb the producer.
	for i := range 3 {
		cp = Checkpoint{Slot: s.cfg.Slot, Position: 0x3000 + pglogrepl.LSN(0x100*i)}
		s.commit(t, p, "b", 10, cp)
	}
	s.wantState(t, "four commits", map[string]int{"a": 50, "b": 30}, cp)
}

// Abort shows neither the transaction's records nor its checkpoint: the reader still
// returns the last committed one.
func TestAbortShowsNeitherRecordsNorCheckpoint(t *testing.T) {
	s := newRealSlot(t)
	p := s.producer(t)
	first := Checkpoint{Slot: s.cfg.Slot, Position: 0x1000}
	s.commit(t, p, "kept", 5, first)
	s.leaveOpen(t, p, "aborted", 20, &Checkpoint{Slot: s.cfg.Slot, Position: 0x9000})
	if err := p.Abort(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// EndTxn answers once the coordinator has logged the abort; the markers that close the
	// transaction in the partitions follow. A transaction the abort left open would stay so
	// for the producer's 30 s transaction timeout: 10 s tells the two apart.
	testenv.Eventually(t, 10*time.Second, "the aborted transaction's markers", func() bool { return !s.openTransactions(t) })
	s.wantState(t, "after the abort", map[string]int{"kept": 5}, first)

	// The producer goes on after an abort.
	s.commit(t, p, "after", 3, Checkpoint{Slot: s.cfg.Slot, Position: 0x2000})
	wantSeen(t, "a commit after the abort", s.committed(t), map[string]int{"kept": 5, "after": 3})
}

// A second producer with the slot's transactional id (a standby that took the slot) fences
// the first (a relay paused past wal_sender_timeout): the first's commit fails with the fence
// error, nothing of its open transaction is ever visible, and its checkpoint is not the one
// the new holder reads.
func TestSecondProducerFencesTheFirst(t *testing.T) {
	s := newRealSlot(t)
	zombie := s.producer(t)
	before := Checkpoint{Slot: s.cfg.Slot, Position: 0x1000}
	s.commit(t, zombie, "before", 4, before)
	s.leaveOpen(t, zombie, "zombie", 25, nil) // acknowledged, in the open transaction

	holder := s.producer(t) // takes the id: the zombie's open transaction is aborted
	s.wantCheckpoint(t, "the new holder reads", before)

	err := zombie.Commit(ctx(t), Checkpoint{Slot: s.cfg.Slot, Position: 0x8000})
	var fe *FencedError
	if !errors.As(err, &fe) || !IsFenced(err) {
		t.Fatalf("the fenced producer's commit returned %v, want a *FencedError", err)
	}
	t.Logf("the zombie's commit: %v", err)
	if err := zombie.Begin(); !IsFenced(err) {
		t.Fatalf("the fenced producer began another transaction: %v", err)
	}
	if s.openTransactions(t) {
		t.Fatal("the zombie's transaction is still open after its fence")
	}
	s.wantState(t, "after the fence", map[string]int{"before": 4}, before)

	// The holder publishes; the zombie's records never appear.
	after := Checkpoint{Slot: s.cfg.Slot, Position: 0x2000}
	s.commit(t, holder, "holder", 6, after)
	s.wantState(t, "the holder's commit", map[string]int{"before": 4, "holder": 6}, after)
}

// A producer that dies mid-transaction (its client closed without EndTransaction: the broker
// sees the connection go, as after a kill -9) leaves its transaction open; the next producer
// of the slot aborts it as it takes the id, and the reader returns the last committed
// checkpoint, not the one the dead transaction held.
func TestReaderReturnsLastCommittedCheckpointAfterACrashMidTransaction(t *testing.T) {
	s := newRealSlot(t)
	dead := s.producer(t)
	committed := Checkpoint{Slot: s.cfg.Slot, Position: 0x1000, Split: Split{LSN: 0x1800, Records: 10}}
	s.commit(t, dead, "committed", 10, committed)
	s.leaveOpen(t, dead, "lost", 30, &Checkpoint{Slot: s.cfg.Slot, Position: 0x1000, Split: Split{LSN: 0x1800, Records: 40}})
	dead.Client().Close() // the crash: no EndTransaction
	if !s.openTransactions(t) {
		t.Fatal("the crashed producer's transaction is not open: the test does not test a crash")
	}

	next := s.producer(t)
	if s.openTransactions(t) {
		t.Fatal("the next producer took the id and the crashed transaction is still open")
	}
	s.wantCheckpoint(t, "after the crash", committed)
	wantSeen(t, "after the crash", s.committed(t), map[string]int{"committed": 10})
	if whole, skip := committed.Skip(0x1800); whole || skip != 10 {
		t.Fatalf("the split transaction's replay skips %v/%d, want its first 10 records", whole, skip)
	}

	done := Checkpoint{Slot: s.cfg.Slot, Position: 0x1900}
	s.commit(t, next, "replayed", 30, done) // records 11..40 of the split transaction
	s.wantState(t, "after the replay", map[string]int{"committed": 10, "replayed": 30}, done)
}

// A checkpoint topic that deletes by retention would lose a stopped relay's checkpoint.
func TestEnsureCheckpointTopicRefusesRetention(t *testing.T) {
	topic := testenv.Name(t) + ".checkpoints"
	testenv.CreateTopic(t, topic, 1) // the broker's default: cleanup.policy=delete
	err := EnsureCheckpointTopic(ctx(t), testenv.Kafka(t), topic, 1)
	var nc *NotCompactedError
	if !errors.As(err, &nc) || nc.Policy != "delete" {
		t.Fatalf("a delete-policy checkpoint topic: %v, want a *NotCompactedError", err)
	}
}

func TestReadCheckpointOfAMissingTopic(t *testing.T) {
	_, _, err := ReadCheckpoint(ctx(t), []kgo.Opt{kgo.SeedBrokers(testenv.Brokers(t)...)}, testenv.Name(t)+".none", "s")
	var tm *TopicMissingError
	if !errors.As(err, &tm) {
		t.Fatalf("reading a missing topic: %v, want a *TopicMissingError", err)
	}
}

// Slots share the checkpoint topic, so another slot's open transaction holds its last stable
// offset below this slot's newest checkpoint when that was committed after the other one
// began. A read that stopped at the last stable offset returned an older checkpoint (here:
// none), and the relay would have published again what it had committed; the read waits for
// the other transaction to end instead.
func TestReadCheckpointWaitsForAnotherSlotsOpenTransaction(t *testing.T) {
	s := newRealSlot(t)
	other := *s
	other.cfg.Slot += "_other"
	otherP := other.producer(t)
	// The other slot's transaction is open in the checkpoint topic.
	other.leaveOpen(t, otherP, "other", 0, &Checkpoint{Slot: other.cfg.Slot, Position: 0x5000})

	cp := Checkpoint{Slot: s.cfg.Slot, Position: 0x1000}
	s.commit(t, s.producer(t), "a", 1, cp)
	s.producer(t) // the slot's relay restarts

	short, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	got, ok, err := ReadCheckpoint(short, s.opts, s.cfg.CheckpointTopic, s.cfg.Slot)
	if err == nil {
		t.Fatalf("with another slot's transaction open the read returned %+v (found %v) without waiting for it", got, ok)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if err := otherP.Abort(ctx(t)); err != nil {
		t.Fatal(err)
	}
	s.wantCheckpoint(t, "once the other transaction ended", cp)
}

// A transaction open longer than its timeout is aborted by the coordinator, which bumps the
// epoch as a fence does; the producer's next produce is refused INVALID_PRODUCER_EPOCH as a
// fenced one's is. But the abort that follows succeeds: the commit reports ErrNotCommitted,
// not a fence (a relay paused past the timeout with no standby is not told that another relay
// holds the slot), and the producer goes on.
func TestTimedOutTransactionIsNotCommittedNotFenced(t *testing.T) {
	t.Parallel() // the coordinator looks for timed-out transactions every 10 s
	s := newRealSlot(t)
	s.cfg.TransactionTimeout = time.Second
	p := s.producer(t)
	s.leaveOpen(t, p, "timed-out", 3, nil)
	testenv.Eventually(t, 60*time.Second, "the coordinator aborts the timed-out transaction", func() bool { return !s.openTransactions(t) })
	err := p.Commit(ctx(t), Checkpoint{Slot: s.cfg.Slot, Position: 0x1000})
	if !errors.Is(err, ErrNotCommitted) || IsFenced(err) {
		t.Fatalf("the commit of a timed-out transaction returned %v, want ErrNotCommitted and no fence", err)
	}
	wantSeen(t, "after the timeout", s.committed(t), map[string]int{})
	cp := Checkpoint{Slot: s.cfg.Slot, Position: 0x2000}
	s.commit(t, p, "next", 2, cp)
	s.wantState(t, "the next transaction", map[string]int{"next": 2}, cp)
}

// Commit returns once the coordinator wrote the transaction's markers, not when it logged
// PrepareCommit: a read_committed consumer reads the transaction at once, and the next one,
// begun at once, is not held back as a concurrent transaction (completed.go).
func TestCommitReturnsOnceTheTransactionIsComplete(t *testing.T) {
	s := newRealSlot(t)
	p := s.producer(t)
	const commits = 20
	for i := range commits {
		cp := Checkpoint{Slot: s.cfg.Slot, Position: 0x1000 + pglogrepl.LSN(0x100*i)}
		s.commit(t, p, "k", 1, cp)
		state, err := p.transactionState(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if state != "CompleteCommit" {
			t.Fatalf("commit %d returned with the transaction %s, want CompleteCommit", i+1, state)
		}
	}
	// No wait for open transactions here: the markers of every commit are written.
	wantSeen(t, "right after the last commit", s.visible(t), map[string]int{"k": commits})
}
