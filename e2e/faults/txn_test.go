package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// txnOutcome is what one Kafka transaction's Commit said.
type txnOutcome int

const (
	txnCommitted    txnOutcome = iota // nil: visible whole
	txnNotCommitted                   // ErrNotCommitted: invisible
	txnUnknown                        // ErrOutcomeUnknown: whole or nothing
)

func (o txnOutcome) String() string {
	return [...]string{"committed", "not committed", "outcome unknown"}[o]
}

// The broker killed (SIGKILL) and started again while a slot's transactional producer commits
// transaction after transaction: every Commit says what happened, and says it truly. Each
// transaction is visible to read_committed consumers whole when Commit returned nil, not at all
// when it returned ErrNotCommitted (whole or not at all when the outcome is unknown), never a
// part of one; the checkpoint is the newest visible transaction's; no error is taken for a
// fence; and transactions commit again once the broker is back. A Commit whose outcome is
// unknown spends the producer (txn.ErrSpent): the loop goes on with a new one on a new client,
// as the relay's restart and the poller do. The old client would take the id back at its old
// epoch, which Kafka 4.4 refuses with PRODUCER_FENCED when the kill came between the commit's
// epoch bump and its answer (about one run in five).
func TestTransactionalCommitsSayTrulyWhatABrokerKillDid(t *testing.T) {
	testenv.CheckControlled(t)
	name := testenv.Name(t)
	topic := name + ".events"
	testenv.CreateTopic(t, topic, 3)
	opts := []kgo.Opt{kgo.SeedBrokers(testenv.Brokers(t)...)}
	cfg := kafkatxn.Config{Slot: name, CheckpointTopic: name + ".checkpoints"}
	adm := testenv.Kafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := kafkatxn.EnsureCheckpointTopic(ctx, adm, cfg.CheckpointTopic, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(adm).DeleteTopics(c, cfg.CheckpointTopic)
	})
	newProducer := func() (*kafkatxn.Producer, error) {
		cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), cfg.ClientOpts()...)...)
		if err != nil {
			return nil, err
		}
		p, err := kafkatxn.New(ctx, cl, cfg)
		if err != nil {
			cl.Close()
			return nil, err
		}
		return p, nil
	}
	p, err := newProducer()
	if err != nil {
		t.Fatal(err)
	}

	const records = 20
	var (
		mu       sync.Mutex
		outcomes = map[int]txnOutcome{}
		errs     []string
		stop     = make(chan struct{})
		done     = make(chan error, 1)
	)
	committedSince := func(n int) int { // how many transactions after n committed
		mu.Lock()
		defer mu.Unlock()
		c := 0
		for k, o := range outcomes {
			if k > n && o == txnCommitted {
				c++
			}
		}
		return c
	}
	go func() {
		defer func() { p.Client().Close() }()
		cp := kafkatxn.Checkpoint{Slot: cfg.Slot}
		for n := 1; ; n++ {
			cp.Position++ // transaction n's checkpoint is at position n
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := p.Begin(); err != nil {
				done <- err
				return
			}
			for i := range records {
				p.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%d/%d", n, i)}, nil)
			}
			err := p.Commit(ctx, cp)
			mu.Lock()
			switch {
			case err == nil:
				outcomes[n] = txnCommitted
			case kafkatxn.IsFenced(err):
				mu.Unlock()
				done <- err
				return
			case errors.Is(err, kafkatxn.ErrNotCommitted):
				outcomes[n] = txnNotCommitted
			case errors.Is(err, kafkatxn.ErrOutcomeUnknown):
				outcomes[n] = txnUnknown
			default:
				mu.Unlock()
				done <- fmt.Errorf("transaction %d: an error Commit does not classify: %w", n, err)
				return
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("%d: %v", n, err))
			}
			mu.Unlock()
			if p.Spent() {
				// Taken again once the broker is back, as the relay's restart takes it.
				spent := p
				err := retry.Backoff{Min: 250 * time.Millisecond, Max: time.Second}.Until(ctx, func(int) error {
					np, err := newProducer()
					if err == nil {
						p = np
					}
					return err
				}, kafkatxn.Transient, nil)
				spent.Client().Close() // the deferred Close closes p's
				if err != nil {
					done <- fmt.Errorf("a new producer after transaction %d: %w", n, err)
					return
				}
			}
		}
	}()
	finish := func() {
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 60*time.Second, "5 commits before the kill", func() bool { return committedSince(0) >= 5 })
	testenv.KafkaCtl(t, "kill")
	testenv.KafkaCtl(t, "start")
	mu.Lock()
	last := len(outcomes)
	mu.Unlock()
	testenv.Eventually(t, 3*time.Minute, "5 commits after the broker is back", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the producer stopped: %v", err)
		default:
		}
		return committedSince(last) >= 5
	})
	finish()

	seen := map[int]int{}
	if err := kafkatxn.ReadCommitted(ctx, opts, topic, func(r *kgo.Record) {
		n, _, _ := strings.Cut(string(r.Value), "/")
		k, _ := strconv.Atoi(n)
		seen[k]++
	}); err != nil {
		t.Fatal(err)
	}
	newest := 0
	for n, o := range outcomes {
		switch {
		case seen[n] != 0 && seen[n] != records:
			t.Errorf("transaction %d (%v) shows %d of its %d records", n, o, seen[n], records)
		case o == txnCommitted && seen[n] == 0:
			t.Errorf("transaction %d committed and shows nothing", n)
		case o == txnNotCommitted && seen[n] != 0:
			t.Errorf("transaction %d was not committed and shows its records", n)
		}
		if seen[n] == records {
			newest = max(newest, n)
		}
	}
	for n := range seen {
		if _, ok := outcomes[n]; !ok {
			t.Errorf("transaction %d, never committed, shows %d records", n, seen[n])
		}
	}
	cp, ok, err := kafkatxn.ReadCheckpoint(ctx, opts, cfg.CheckpointTopic, cfg.Slot)
	if err != nil || !ok || int(cp.Position) != newest {
		t.Errorf("the checkpoint is %+v (found %v, %v), want the newest visible transaction's, %d", cp, ok, err, newest)
	}
	t.Logf("%d transactions, %d committed after the kill; the errors Commit gave: %s", len(outcomes), committedSince(last), strings.Join(errs, "; "))
}
