package poller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/kafkatxn"
	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// Kafka gone in the middle of an exactly-once batch: the batch is rolled back, its Kafka
// transaction cannot be aborted while the broker is away and stays open in the client; the
// next cycle that reaches Kafka aborts it before it begins another (without that, every later
// Begin fails: franz-go is still in the old transaction), and a read_committed consumer sees
// each row once.
func TestExactlyOnceBrokerDownAbortsTheBatchThenPublishesEachRowOnce(t *testing.T) {
	p, f, fx := exactlyOnceAfterFirstBatch(t)
	ctx := context.Background()
	f.down.Store(true)
	if _, err := p.cycle(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("cycle with Kafka down: %v, want ErrUnavailable", err)
	}
	if got := pendingRows(t, fx); got != 15 {
		t.Fatalf("%d rows pending, want 15: the rolled-back batch must stay pending", got)
	}
	f.down.Store(false)
	publishRestEachRowOnce(t, p, f, fx, "")
	b, ok, err := kafkatxn.ReadBatch(ctx, []kgo.Opt{kgo.SeedBrokers(f.c.ListenAddrs()...)}, "checkpoints", kafkatxn.PollKey(kafkatxn.PollTransactionalID(fx.Table)))
	if err != nil || !ok || b.Seq != 3 || b.Table != fx.Table || len(b.IDs) != 5 {
		t.Errorf("newest checkpoint %+v (found %v, %v), want batch 3 of %s with the last 5 rows", b, ok, err, fx.Table)
	}
}

// A commit whose answer is lost (the broker died before it answered), then a coordinator that
// refuses the producer's old epoch with PRODUCER_FENCED: Kafka 4.4 does when the commit reached
// a coordinator that restarted before it answered, which forgets the epoch before the one the
// commit bumped to (e2e/faults' broker kill met it about one run in five). The poller takes the
// transactional id again with a new Kafka client and publishes on, each row once; it does not
// stop as if another poller had taken the id.
func TestExactlyOncePublishesOnAfterAnUnansweredCommitWhoseEpochKafkaRefuses(t *testing.T) {
	p, f, fx := exactlyOnceAfterFirstBatch(t)
	ctx := context.Background()
	f.c.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if !kreq.(*kmsg.EndTxnRequest).Commit {
			f.c.KeepControl()
			return nil, nil, false
		}
		f.down.Store(true) // gone before it answers; the abort's retries meet it gone
		return nil, errors.New("the broker died before it answered the commit"), true
	})
	var refused atomic.Int32
	f.c.ControlKey(int16(kmsg.InitProducerID), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		req := kreq.(*kmsg.InitProducerIDRequest)
		if req.ProducerID < 0 {
			return nil, nil, false // a new client's: it takes the id at whatever epoch
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ProducerFenced.Code
		return resp, nil, true
	})
	if _, err := p.cycle(ctx); !errors.Is(err, ErrUnavailable) || !errors.Is(err, kafkatxn.ErrOutcomeUnknown) {
		t.Fatalf("cycle whose commit went unanswered: %v, want ErrUnavailable and txn.ErrOutcomeUnknown", err)
	}
	f.down.Store(false)
	publishRestEachRowOnce(t, p, f, fx, fmt.Sprintf(" (the old epoch was refused %d times)", refused.Load()))
}

// exactlyOnceAfterFirstBatch is an exactly-once poller of 25 rows on a fake Kafka (with the
// topics events and dlq), its first batch of 10 published.
func exactlyOnceAfterFirstBatch(t *testing.T) (*Poller, *fake, *testenv.Fixture) {
	t.Helper()
	f := newFake(t, "events", "dlq")
	p, fx := newTestPollerWith(t, f, 25, &ExactlyOnce{CheckpointTopic: "checkpoints", CheckpointReplicas: 1})
	if n, err := p.cycle(context.Background()); err != nil || n != 10 {
		t.Fatalf("first cycle: %d rows, %v", n, err)
	}
	return p, f, fx
}

// publishRestEachRowOnce runs p's cycles until no row of fx is pending, allowing a few
// retryable errors after Kafka came back (what says why is added to a failure), and wants a
// read_committed consumer of f's events topic to see each of fx's 25 rows once.
func publishRestEachRowOnce(t *testing.T, p *Poller, f *fake, fx *testenv.Fixture, why string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; pendingRows(t, fx) > 0; i++ {
		if _, err := p.cycle(ctx); err != nil && (i > 5 || !IsRetryable(err)) {
			t.Fatalf("cycle %d after Kafka came back: %v%s", i, err, why)
		}
	}
	seen := map[string]int{}
	err := kafkatxn.ReadCommitted(ctx, []kgo.Opt{kgo.SeedBrokers(f.c.ListenAddrs()...)}, "events", func(r *kgo.Record) {
		seen[testenv.Header(r, "outbox-id")]++
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 25 {
		t.Errorf("a read_committed consumer saw %d rows, want 25", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("outbox id %s seen %d times read_committed", id, n)
		}
	}
}

// An exactly-once poller's sessions end a transaction left idle past the Kafka transaction
// timeout (so a paused poller's locked rows are released for the holder, whose select waits
// for them), unless the connection string sets its own; an at-least-once poller's are left as
// they are.
func TestExactlyOnceSessionsEndTransactionsIdlePastTheKafkaTransaction(t *testing.T) {
	for _, c := range []struct {
		url  string
		eos  bool
		want string
	}{
		{"postgres://x@y/z", true, "30000"},
		{"postgres://x@y/z?idle_in_transaction_session_timeout=5000", true, "5000"},
		{"postgres://x@y/z", false, ""},
	} {
		cc, err := pgx.ParseConfig(c.url)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Conn: cc, Sink: sink.Config{Brokers: []string{"b:1"}}}
		if c.eos {
			cfg.ExactlyOnce = &ExactlyOnce{}
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.pool.Config().ConnConfig.RuntimeParams[idleInTransaction]; got != c.want {
			t.Errorf("%s (exactly-once %v): %s = %q, want %q", c.url, c.eos, idleInTransaction, got, c.want)
		}
		p.Close()
	}
}
