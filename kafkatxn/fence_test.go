package kafkatxn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeProducer is a Producer on a kfake cluster with topics "t" and the checkpoint topic.
func fakeProducer(t *testing.T, control func(*kfake.Cluster)) (*Producer, error) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t", DefaultCheckpointTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if control != nil {
		control(c)
	}
	cfg := Config{Slot: "s"}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.RetryTimeout(2 * time.Second)}, cfg.ClientOpts()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return New(ctx, cl, cfg)
}

func endTxnAnswer(code int16, commitOnly bool) func(*kfake.Cluster) {
	return func(c *kfake.Cluster) {
		c.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			req := kreq.(*kmsg.EndTxnRequest)
			if commitOnly && !req.Commit {
				return nil, nil, false
			}
			resp := req.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = code
			return resp, nil, true
		})
	}
}

func commitOne(t *testing.T, p *Producer) error {
	t.Helper()
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Client().ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return p.Commit(ctx, Checkpoint{Slot: "s", Position: 0x100})
}

// A fence answered to the commit is the fatal error that names the transactional id.
func TestCommitFencedIsFatalFencedError(t *testing.T) {
	p, err := fakeProducer(t, endTxnAnswer(kerr.ProducerFenced.Code, false))
	if err != nil {
		t.Fatal(err)
	}
	err = commitOne(t, p)
	var fe *FencedError
	if !errors.As(err, &fe) || !IsFenced(err) || !errors.Is(err, ErrFenced) {
		t.Fatalf("commit answered PRODUCER_FENCED returned %v (%T), not a *FencedError", err, err)
	}
	if fe.TransactionalID != "cdc-relay-s" || !strings.Contains(err.Error(), "another relay holds this slot's transactional id") {
		t.Fatalf("the fence error does not say who and what: %v", err)
	}
	if errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a fence is a known outcome (nothing committed), not an unknown one: %v", err)
	}
}

// A commit whose answer says nothing certain (UNKNOWN_SERVER_ERROR) is reported as unknown,
// never as committed nor as aborted: the caller must read the checkpoint again.
func TestCommitUnconfirmedIsOutcomeUnknown(t *testing.T) {
	p, err := fakeProducer(t, endTxnAnswer(kerr.UnknownServerError.Code, true))
	if err != nil {
		t.Fatal(err)
	}
	err = commitOne(t, p)
	if !errors.Is(err, ErrOutcomeUnknown) || IsFenced(err) {
		t.Fatalf("commit answered UNKNOWN_SERVER_ERROR returned %v, want ErrOutcomeUnknown", err)
	}
	// The producer is spent: franz-go would take the id back at the old epoch, which Kafka may
	// refuse as a fence no other producer caused (ErrSpent). The caller makes a new one.
	if !p.Spent() {
		t.Fatal("a commit whose outcome is unknown left the producer usable")
	}
	if err := p.Begin(); !errors.Is(err, ErrSpent) {
		t.Errorf("Begin on a spent producer returned %v, want ErrSpent", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Commit(ctx, Checkpoint{Slot: "s", Position: 0x200}); !errors.Is(err, ErrSpent) {
		t.Errorf("Commit on a spent producer returned %v, want ErrSpent", err)
	}
	if err := p.Abort(ctx); err != nil {
		t.Errorf("Abort on a spent producer returned %v, want nil (the next producer's New aborts what is left)", err)
	}
}

// A commit that Kafka answered is no reason to spend the producer: the next one begins.
func TestCommitAnsweredLeavesTheProducerUsable(t *testing.T) {
	p, err := fakeProducer(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := commitOne(t, p); err != nil {
		t.Fatal(err)
	}
	if p.Spent() {
		t.Fatal("a committed transaction spent the producer")
	}
	if err := commitOne(t, p); err != nil {
		t.Fatalf("the second transaction: %v", err)
	}
}

// Taking the transactional id can fail two ways: a newer producer fenced this one as it
// started (a fence), or the credentials may not use the id (not a fence: bad configuration).
func TestNewClassifiesInitProducerIDErrors(t *testing.T) {
	for _, c := range []struct {
		code   int16
		fenced bool
	}{
		{kerr.ProducerFenced.Code, true},
		{kerr.TransactionalIDAuthorizationFailed.Code, false},
	} {
		_, err := fakeProducer(t, func(cl *kfake.Cluster) {
			cl.ControlKey(int16(kmsg.InitProducerID), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				cl.KeepControl()
				resp := kreq.ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ErrorCode = c.code
				return resp, nil, true
			})
		})
		if err == nil || IsFenced(err) != c.fenced {
			t.Errorf("InitProducerID answered %s: New returned %v, fenced %v, want fenced %v", kerr.ErrorForCode(c.code), err, IsFenced(err), c.fenced)
		}
	}
}

func TestNewRefusesAClientWithoutTheSlotsTransactionalID(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, opts := range [][]kgo.Opt{nil, {kgo.TransactionalID("other")}} {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(context.Background(), cl, Config{Slot: "s"})
		cl.Close()
		if err == nil || !strings.Contains(err.Error(), "Config.ClientOpts") {
			t.Errorf("a client with %d options: New returned %v, want it to name Config.ClientOpts", len(opts), err)
		}
	}
	if _, err := New(context.Background(), nil, Config{}); !errors.Is(err, ErrNoSlot) {
		t.Errorf("no slot: %v", err)
	}
}

// A transaction's first produce that meets CONCURRENT_TRANSACTIONS (under KIP-890 the
// partition's leader adds it to the transaction, and the coordinator was still writing the
// previous transaction's markers) is acknowledged soon after: franz-go retries such a batch
// after a metadata refresh, which waited for the client's minimum metadata age since the last
// one, 5 s by default, and the commit that waits for the record with it.
func TestFirstProduceAfterACommitRetriesSoonAfterConcurrentTransactions(t *testing.T) {
	var c *kfake.Cluster
	p, err := fakeProducer(t, func(cl *kfake.Cluster) { c = cl })
	if err != nil {
		t.Fatal(err)
	}
	if err := commitOne(t, p); err != nil {
		t.Fatal(err)
	}
	busy := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.ConcurrentTransactions})
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := p.Client().ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if busy.Hits() != 1 {
		t.Fatalf("the produce met CONCURRENT_TRANSACTIONS %d times, want once", busy.Hits())
	}
	if took > time.Second {
		t.Errorf("the produce that met CONCURRENT_TRANSACTIONS was acknowledged after %s, want within 1 s (MetadataMinAge %s)", took, MetadataMinAge)
	}
	if err := p.Commit(ctx, Checkpoint{Slot: "s", Position: 0x200}); err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged %s after it met CONCURRENT_TRANSACTIONS", took.Round(time.Millisecond))
}
