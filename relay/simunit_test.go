package relay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cdc-relay/cdc-relay/replication"
	"github.com/cdc-relay/cdc-relay/sink"
	"github.com/cdc-relay/cdc-relay/testkit/memnet"
	"github.com/cdc-relay/cdc-relay/testkit/simwal"
)

// Single scenarios on the simulation's harness (sim_test.go), with fixed inputs. Those that need
// no real socket run in a testing/synctest bubble on the in-memory network (vsim_test.go), so an
// outage of seconds takes milliseconds and no bound depends on the machine's load.

func fixedHarness(t *testing.T, statusInterval time.Duration) *harness {
	t.Helper()
	return newFixedHarness(t, &schedule{topics: []simTopic{{name: "sim.t0", partitions: 1}}, maxRecords: 100, maxBytes: 1 << 20,
		buffer: 64, statusInterval: statusInterval, shutdown: 2 * time.Second})
}

// newFixedHarness sets up sc's world (no schedule of runs: the test drives it), the relay's log
// going to h.logw, and closes it when the test ends.
func newFixedHarness(t *testing.T, sc *schedule) *harness {
	t.Helper()
	logw := &lockedBuf{}
	h := &harness{t: t, sc: sc, logw: logw, store: &tableStore{}, log: slog.New(slog.NewTextHandler(logw, nil)), vnet: &memnet.Network{}}
	if err := h.setup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	return h
}

// startRelay runs a relay on h's slot until the test ends and returns once it streams; at the
// end it cancels it and fails the test if Run returned an error or an invariant did not hold.
func (h *harness) startRelay(t *testing.T) (*Relay, context.Context) {
	t.Helper()
	r, _ := h.newRelay(0)
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		runErr = r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-ran
		if runErr != nil {
			t.Errorf("Run = %v", runErr)
		}
		h.failOnViolations()
	})
	waitFor(t, 10*time.Second, "streaming", func() bool { return r.stream.State() == replication.StateStreaming })
	return r, ctx
}

func (h *harness) failOnViolations() {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, v := range h.violations {
		h.t.Error(v)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

func oneRow(id int64) []simTxnSpec {
	return []simTxnSpec{{rows: []simRow{{id: id, key: "k", topic: "sim.t0", payload: `{"n":1}`}}}}
}

// The replay window: once Kafka has acknowledged a transaction, the walsender hears the
// covering flush position soon, not at the next heartbeat (StatusInterval 10 s here).
func TestSimConfirmsPromptly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := fixedHarness(t, 10*time.Second)
		r, ctx := h.startRelay(t)
		time.Sleep(50 * time.Millisecond) // past the first status update
		h.commit(ctx, oneRow(1), 0)
		end := h.committed[0].txn.EndLSN
		waitFor(t, 10*time.Second, "acknowledged", func() bool { return r.stats.Published.Load() == 1 })
		took := waitFor(t, 10*time.Second, "flush received", func() bool { return h.srv.Confirmed() >= end })
		if took > time.Second {
			t.Errorf("the walsender heard the confirmed position %s after Kafka's acknowledgement: want it within 1s (replay window)", took)
		}
	})
}

// A broker that stops acknowledging is noticed after kafkaStallAfter, probed, and the position
// holds until it is back; the metrics and readiness say so.
func TestSimKafkaOutageIsProbedAndPositionHolds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		if testing.Short() {
			t.Skip("a 6 s outage")
		}
		h := fixedHarness(t, 20*time.Millisecond)
		r, ctx := h.startRelay(t)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		if err := r.Ready(rctx); err != nil {
			t.Errorf("Ready = %v while streaming", err)
		}
		rcancel()
		down := h.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotLeaderForPartition, Count: -1})
		before := h.srv.Confirmed()
		h.commit(ctx, oneRow(1), 0)
		waitFor(t, 15*time.Second, "outage noticed and probed", func() bool {
			return r.stats.KafkaOutages.Load() == 1 && r.stats.KafkaProbes.Load() >= 1
		})
		snap := r.MetricsSnapshot()
		if snap.RecordsInFlight != 1 || snap.TxnsInFlight != 1 || snap.OldestUnacked.IsZero() || snap.KafkaOutages != 1 {
			t.Errorf("snapshot during the outage: %+v", snap)
		}
		if c := h.srv.Confirmed(); c > h.committed[0].txn.CommitLSN || r.track.inFlight() != 1 {
			t.Errorf("confirmed %s (before %s) with the only transaction unacknowledged; in flight %d", c, before, r.track.inFlight())
		}
		down.Remove()
		end := h.committed[0].txn.EndLSN
		waitFor(t, 15*time.Second, "confirmed after the outage", func() bool { return h.srv.Confirmed() >= end })
		if r.Confirmed() < end {
			t.Errorf("relay confirmed %s, want %s", r.Confirmed(), end)
		}
	})
}

// A cancel while Produce waits for buffer space (MaxBufferedRecords 5, the broker slow) leaves
// no gap per key and returns nil; the next start delivers the rest in order.
func TestSimCancelWhileProduceBlocked(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := fixedHarness(t, 20*time.Millisecond)
		h.sc.maxRecords = 5
		var txns []simTxnSpec
		for i := range 40 {
			txns = append(txns, simTxnSpec{rows: []simRow{{id: int64(i + 1), key: "k", topic: "sim.t0", payload: `{"n":1}`}}})
		}
		h.commit(context.Background(), txns, 0)
		for round := 0; round < 3; round++ {
			slow := h.installFault(context.Background(), simFault{kind: faultSlow, count: 1000, dur: 40 * time.Millisecond})
			r, _ := h.newRelay(0)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- r.Run(ctx) }()
			waitFor(t, 10*time.Second, "blocked on the buffer", func() bool { return r.sink.Buffered() >= 5 })
			time.Sleep(time.Duration(round*15) * time.Millisecond)
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("round %d: Run = %v after a cancel while Produce was blocked", round, err)
			}
			slow()
		}
		h.finalRun(nil)
		h.checkEnd()
		h.failOnViolations()
	})
}

// Run waits for Kafka at startup and stops cleanly when canceled meanwhile.
func TestSimRunWithoutKafkaStopsOnCancel(t *testing.T) {
	t.Parallel()
	srv, err := simwal.New("sim_slot", 0x1000)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r, err := New(Config{
		Replication:    replication.Config{Conn: srv.ConnConfig(), Slot: "sim_slot", Publications: []string{"pub"}},
		Sink:           sink.Config{Brokers: []string{"127.0.0.1:1"}, DialTimeout: 100 * time.Millisecond},
		StartupTimeout: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	r.table = &simTable{store: &tableStore{}}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run = %v, want nil on a cancel while Kafka is unreachable", err)
	}
	if len(srv.Sessions()) != 0 {
		t.Error("the slot was read before Kafka answered")
	}
}

// The PostgreSQL dead-letter table retries while PostgreSQL is unreachable, keeps the letters
// and holds the position (done is never called), until ctx ends.
func TestDeadTableRetriesUntilCanceled(t *testing.T) {
	t.Parallel()
	conn, err := pgx.ParseConfig("postgres://u:pw@127.0.0.1:1/db?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	d := &deadTable{connCfg: conn, slot: "s",
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), written: func() {}}
	d.push(tableLetter{rec: &kgo.Record{Topic: simDLQ}, refusal: kerr.TopicAuthorizationFailed, txn: &txn{}})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	called := false
	err = d.write(ctx, func(*kgo.Record, *txn) { called = true })
	if !errors.Is(err, context.DeadlineExceeded) || called || d.len() != 1 {
		t.Fatalf("write = %v, done called %v, %d queued: want the deadline, no done, the letter kept", err, called, d.len())
	}
	d.close()
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{Buffer: -1}).Validate(); err == nil {
		t.Fatal("an empty config with a negative buffer was accepted")
	}
	c := Config{}.withDefaults()
	if c.DLQTopic == "" || c.Buffer == 0 || c.ShutdownTimeout == 0 || c.Logger == nil {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

// Before streaming the relay is not ready, and says why.
func TestReadyBeforeStreaming(t *testing.T) {
	conn, err := pgx.ParseConfig("postgres://u@127.0.0.1:1/db")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{
		Replication: replication.Config{Conn: conn, Slot: "s", Publications: []string{"p"}},
		Sink:        sink.Config{Brokers: []string{"127.0.0.1:1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.sink.Close()
	if err := r.Ready(context.Background()); err == nil {
		t.Fatal("ready before streaming")
	}
	if s := r.MetricsSnapshot(); s.State != replication.StateConnecting.String() || s.TxnsInFlight != 0 {
		t.Errorf("snapshot %+v", s)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
}

// The tracker compacts its queue once most of it is done, and keeps confirming in order.
func TestTrackerCompactsLongQueues(t *testing.T) {
	var c confirms
	tr := newTracker(c.add)
	var open []*txn
	for i := range 3000 {
		x := tr.begin()
		tr.add(x)
		tr.commit(x, pglogrepl.LSN(i+1))
		open = append(open, x)
	}
	for _, x := range open[:2500] {
		tr.done(x)
	}
	tr.begin() // compacts: head > 1024 and more than half done
	if c.last() != 2500 || tr.inFlight() != 501 {
		t.Fatalf("confirmed %s with %d in flight", c.last(), tr.inFlight())
	}
	for _, x := range open[2500:] {
		tr.done(x)
	}
	if c.last() != 3000 {
		t.Fatalf("confirmed %s, want 3000", c.last())
	}
}

// A relay started as a standby (the slot held by another process) that
// never streamed waits across a PostgreSQL outage instead of exiting, and takes over once the
// server is back and the slot is free.
func TestSimStandbyWaitsAcrossPostgresOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := fixedHarness(t, 20*time.Millisecond)
		h.srv.HoldSlot(4242)
		r, _ := h.newRelay(0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- r.Run(ctx) }()
		running := func(what string, cond func() bool) func() bool {
			return func() bool {
				select {
				case err := <-errc:
					t.Fatalf("Run returned %v while %s; a standby that never streamed must wait", err, what)
				default:
				}
				return cond()
			}
		}
		waitFor(t, 10*time.Second, "standby", running("a standby", func() bool { return r.stream.State() == replication.StateStandby }))
		h.srv.SetDown(true)
		waitFor(t, 10*time.Second, "refused connections", running("PostgreSQL was down", func() bool { return h.srv.Refused() >= 3 }))
		h.srv.SetDown(false)
		h.srv.HoldSlot(0)
		h.commit(ctx, oneRow(1), 0)
		end := h.committed[0].txn.EndLSN
		waitFor(t, 10*time.Second, "the slot confirmed the row", running("taking over", func() bool { return h.srv.Confirmed() >= end }))
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run after cancel = %v", err)
		}
		h.failOnViolations()
	})
}
