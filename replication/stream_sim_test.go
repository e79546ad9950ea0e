package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/testkit/simwal"
)

// simStream starts a fake walsender (testkit/simwal) and a Stream on it.
// connectTimeout, when given, bounds connecting and starting a session (default 10s).
func simStream(t *testing.T, cfg Config, connectTimeout ...time.Duration) (*simwal.Server, *Stream) {
	t.Helper()
	srv, err := simwal.New("sim_slot", 0x1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cfg.Conn = srv.ConnConfig()
	for _, d := range connectTimeout {
		cfg.Conn.ConnectTimeout = d
	}
	cfg.Slot = "sim_slot"
	cfg.Publications = []string{"pub"}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff, cfg.StandbyRetry = 5*time.Millisecond, 20*time.Millisecond, 10*time.Millisecond
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, s
}

func row(rel *simwal.Relation, id string) simwal.Change {
	return simwal.Change{Rel: rel, Values: []simwal.Value{simwal.Text(id), simwal.Text("k"), simwal.Text("t"), simwal.Text("{}"), nil, nil}}
}

// collect reads batches until want data messages arrived or the deadline.
func collect(t *testing.T, ch <-chan []Message, want int, kinds map[Kind]int) []Message {
	t.Helper()
	var got []Message
	deadline := time.After(10 * time.Second)
	for kinds[KindData] < want {
		select {
		case b := <-ch:
			for _, m := range b {
				kinds[m.Kind]++
				got = append(got, m)
			}
		case <-deadline:
			t.Fatalf("%d data messages, want %d", kinds[KindData], want)
		}
	}
	return got
}

// awaitConfirmed waits until the server's slot is confirmed at want.
func awaitConfirmed(t *testing.T, srv *simwal.Server, want pglogrepl.LSN, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for srv.Confirmed() != want {
		if time.Now().After(deadline) {
			t.Fatalf("slot confirmed at %s, want %s", srv.Confirmed(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitState waits until the stream is in state want.
func awaitState(t *testing.T, s *Stream, want State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("state %s, want %s", s.State(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// stopSim cancels a Run started by runSim, which must return nil, and closes the stream.
func stopSim(t *testing.T, cancel context.CancelFunc, errc <-chan error, s *Stream) {
	t.Helper()
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run = %v", err)
	}
	_ = s.Close(context.Background())
}

// The stream reads the slot, starts from its confirmed position, forwards every message in
// server order and reports the acknowledged position.
func TestSimStreamForwardsAndConfirms(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: 20 * time.Millisecond})
	rel := simwal.OutboxRelation(16384)
	var last simwal.Txn
	for i := range 3 {
		last = srv.Commit(64, []simwal.Change{row(rel, string(rune('1'+i)))})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, errc := runSim(ctx, s, 16)
	kinds := map[Kind]int{}
	got := collect(t, ch, 3*3+1, kinds) // Begin, Insert, Commit each, one Relation
	if got[0].Kind != KindData || got[0].Data[0] != 'B' {
		t.Fatalf("first message %+v", got[0])
	}
	s.Ack(last.EndLSN)
	awaitConfirmed(t, srv, last.EndLSN, 5*time.Second)
	if s.State() != StateStreaming {
		t.Errorf("state %s", s.State())
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close = %v", err)
	}
	if ss := srv.Sessions(); len(ss) != 1 || ss[0].Start != 0x1000 {
		t.Errorf("sessions %+v", ss)
	}
}

// Caught up, a transaction whose messages arrive one segment at a time (a walsender sends each
// with its own send()) reaches the consumer as one batch, Begin to Commit: one hand-over to the
// pipeline per transaction, not one per message.
func TestSimStreamHandsACaughtUpTransactionOverWhole(t *testing.T) {
	srv, s := simStream(t, Config{})
	srv.Script = func(e simwal.Event) simwal.Action { return simwal.Action{Pause: 2 * time.Millisecond} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan []Message, 16)
	go func() { _ = s.Run(ctx, ch) }()
	// Committed while the stream streams: a backlog (transactions sent 10ms or more after
	// their commit) is read in its own mode, by bounded reads.
	for began := time.Now(); s.State() != StateStreaming; time.Sleep(time.Millisecond) {
		if time.Since(began) > 10*time.Second {
			t.Fatalf("state %s after 10s, want streaming", s.State())
		}
	}
	rel := simwal.OutboxRelation(16384)
	deadline := time.After(10 * time.Second)
	// One at a time, each committed once the last arrived: three committed at once would be
	// sent 10ms or more after their commit, which is a backlog.
	for i := range 3 {
		srv.Commit(64, []simwal.Change{row(rel, string(rune('1'+i))), row(rel, string(rune('a'+i)))})
		for got := false; !got; {
			select {
			case b := <-ch:
				var kinds []byte
				for _, m := range b {
					if m.Kind == KindData {
						kinds = append(kinds, m.Data[0])
					}
				}
				if len(kinds) == 0 {
					continue
				}
				if kinds[0] != 'B' || kinds[len(kinds)-1] != 'C' {
					t.Fatalf("transaction %d came in a batch of %q: want it whole, from its Begin to its Commit", i+1, kinds)
				}
				got = true
			case <-deadline:
				t.Fatalf("%d transactions in 10s, want 3", i)
			}
		}
	}
}

// A transaction whose Commit is slow to come is not held past the next status update: what was
// read of it goes to the consumer (a walsender decoding a large transaction from disk).
func TestSimStreamForwardsAnOpenTransactionAtTheStatusUpdate(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: 20 * time.Millisecond})
	srv.Script = func(e simwal.Event) simwal.Action {
		if e.Sent == 3 { // Begin, Relation, Insert sent: the Commit waits for the session's end
			return simwal.Action{Pause: time.Hour}
		}
		return simwal.Action{}
	}
	srv.Commit(64, []simwal.Change{row(simwal.OutboxRelation(16384), "1")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan []Message, 16)
	go func() { _ = s.Run(ctx, ch) }()
	got := collect(t, ch, 3, map[Kind]int{})
	for _, m := range got {
		if m.Kind == KindData && m.Data[0] == 'C' {
			t.Fatalf("the Commit arrived, but the walsender never sent it")
		}
	}
}

// A dropped connection is retried: a KindReset goes down the channel and the new session starts
// from the slot's position, replaying what was not confirmed.
func TestSimStreamReconnectsAndReplays(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: 20 * time.Millisecond})
	drops := map[int]int{1: 2} // session 1 drops after 2 messages
	srv.Script = func(e simwal.Event) simwal.Action {
		return simwal.Action{Drop: drops[e.Session] != 0 && e.Sent >= drops[e.Session], Keepalive: e.Sent == 1, Reply: e.Sent == 1}
	}
	rel := simwal.OutboxRelation(16384)
	srv.Commit(0, []simwal.Change{row(rel, "1"), row(rel, "2")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, errc := runSim(ctx, s, 16)
	kinds := map[Kind]int{}
	// Session 1's two messages may or may not have been forwarded before the read failed.
	reset, committed := false, false
	for !committed {
		for _, m := range collect(t, ch, kinds[KindData]+1, kinds) {
			reset = reset || m.Kind == KindReset
			committed = committed || reset && m.Kind == KindData && m.Data[0] == 'C'
		}
	}
	if kinds[KindReset] != 1 || kinds[KindKeepalive] == 0 {
		t.Errorf("kinds %v: want one reset and a keepalive", kinds)
	}
	if s.Reconnects() != 1 {
		t.Errorf("reconnects %d", s.Reconnects())
	}
	stopSim(t, cancel, errc, s)
}

// A slot held by another process makes the stream a standby until it is released.
func TestSimStreamWaitsAsStandby(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: 20 * time.Millisecond})
	srv.HoldSlot(4242)
	srv.Commit(0, []simwal.Change{row(simwal.OutboxRelation(1), "1")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, errc := runSim(ctx, s, 16)
	awaitState(t, s, StateStandby)
	srv.HoldSlot(0)
	collect(t, ch, 4, map[Kind]int{})
	stopSim(t, cancel, errc, s)
}

// Nothing listening: the stream waits for PostgreSQL, retrying, as a relay (re)started during
// an outage must, and a cancel ends it cleanly.
func TestSimStreamNoServerWaits(t *testing.T) {
	srv, s := simStream(t, Config{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}, time.Second)
	srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	_, errc := runSim(ctx, s, 1)
	awaitState(t, s, StateReconnecting)
	select {
	case err := <-errc:
		t.Fatalf("Run returned %v while PostgreSQL was unreachable; want it to keep retrying", err)
	default:
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	var ce *connectError
	if !errors.As(&connectError{err: errors.New("x")}, &ce) || ce.Unwrap() == nil {
		t.Error("connect error does not unwrap")
	}
	_ = pglogrepl.LSN(0)
}

// After a failover the new primary's slot may be behind what the relay confirmed to the old
// one. The next session must start from the slot's own position, replaying what lies between,
// never from the higher position the stream remembers (that would skip those transactions).
func TestSimStreamRestartsFromTheSlotWhenItIsBehind(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: 20 * time.Millisecond, ConfirmDelay: time.Millisecond})
	rel := simwal.OutboxRelation(16384)
	t1 := srv.Commit(0, []simwal.Change{row(rel, "1")})
	t2 := srv.Commit(0, []simwal.Change{row(rel, "2")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, errc := runSim(ctx, s, 64)
	kinds := map[Kind]int{}
	collect(t, ch, 6, kinds) // Begin, Relation, Insert, Commit; Begin, Insert, Commit
	s.Ack(t2.EndLSN)
	awaitConfirmed(t, srv, t2.EndLSN, 10*time.Second)
	srv.RewindSlot(t1.EndLSN) // the promoted standby's slot: behind by t2
	srv.DropAll()
	got := collect(t, ch, kinds[KindData]+3, kinds) // t2 again: Begin, (Relation,) Insert, Commit
	var replayed bool
	for _, m := range got {
		replayed = replayed || m.Kind == KindData && m.Data[0] == 'C' && m.WALStart == t2.CommitLSN
	}
	if !replayed {
		t.Errorf("transaction 2 was not sent again after the slot moved back")
	}
	ss := srv.Sessions()
	if len(ss) < 2 || ss[1].Requested != t1.EndLSN {
		t.Fatalf("sessions %+v: the second must request the slot's position %s, not the remembered %s", ss, t1.EndLSN, t2.EndLSN)
	}
	if f := s.Flushed(); f != t1.EndLSN {
		t.Errorf("flush position after the reconnect %s, want the slot's %s", f, t1.EndLSN)
	}
	stopSim(t, cancel, errc, s)
}

// A server older than 14 ends Run at once with ErrServerTooOld, which names the version and the
// oldest one supported, instead of retrying or failing on the walsender's "unrecognized pgoutput
// option"; every supported major's version string passes, whatever follows the number.
func TestSimStreamRefusesServerOlderThan14(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: 20 * time.Millisecond})
	srv.ServerVersion = "13.16 (Debian 13.16-0+deb11u1)"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Run(ctx, make(chan []Message, 16))
	if !errors.Is(err, ErrServerTooOld) || IsRetryable(err) {
		t.Fatalf("Run on PostgreSQL 13: %v, want ErrServerTooOld, not retryable", err)
	}
	for _, want := range []string{"PostgreSQL 13.16 (Debian 13.16-0+deb11u1)", "needs 14 or later", "--pg-url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := len(srv.Sessions()); n != 0 {
		t.Errorf("%d replication sessions started, want none on a too-old server", n)
	}
	for _, v := range []string{"14.24", "15.8", "16.15", "17.11", "18.6", "18beta1", "19devel", "", "proxy"} {
		if err := checkServerVersion(v); err != nil {
			t.Errorf("server_version %q refused: %v", v, err)
		}
	}
	for _, v := range []string{"13.16", "12.20", "9.6.24", "10.23"} {
		if err := checkServerVersion(v); !errors.Is(err, ErrServerTooOld) {
			t.Errorf("server_version %q: %v, want ErrServerTooOld", v, err)
		}
	}
}
