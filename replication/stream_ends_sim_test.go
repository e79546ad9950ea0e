package replication

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/cdc-relay/cdc-relay/testkit/simwal"
)

// The stream's ends on the fake walsender (drained backlog, outage before streaming, clean stop
// mid-backlog): each fails when its fix is reverted.

// runSim starts s.Run on a channel of size buf and returns the channel and Run's result.
func runSim(ctx context.Context, s *Stream, buf int) (chan []Message, chan error) {
	ch := make(chan []Message, buf)
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx, ch) }()
	return ch, errc
}

// collectRunning is collect that also fails at once if Run returns.
func collectRunning(t *testing.T, ch <-chan []Message, errc <-chan error, want int) []Message {
	t.Helper()
	var got []Message
	data := 0
	deadline := time.After(10 * time.Second)
	for data < want {
		select {
		case b := <-ch:
			for _, m := range b {
				if m.Kind == KindData {
					data++
				}
				got = append(got, m)
			}
		case err := <-errc:
			t.Fatalf("Run returned %v after %d of %d data messages; want it to keep going", err, data, want)
		case <-deadline:
			t.Fatalf("%d data messages, want %d", data, want)
		}
	}
	return got
}

// No idle spin: once a backlog is drained, a quiet stream leaves the drain mode
// (SO_RCVLOWAT raised, reads bounded by 1 ms) within idleAfter of the last message, although
// no Begin with little lag ever comes: a quiet outbox sends none, and the 1 ms bound kept an
// idle relay at 7-9 % of a core. s.read.lowat is read after Run returned (no race).
func TestSimStreamLeavesDrainModeWhenTheBacklogEnds(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: 50 * time.Millisecond, ConfirmDelay: time.Millisecond})
	rel := simwal.OutboxRelation(16384)
	const n = 200
	var last simwal.Txn
	for range n {
		last = srv.Commit(0, []simwal.Change{row(rel, "1")})
	}
	time.Sleep(2 * behindLag) // the backlog's Begins now lag their commits: the stream drains
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, errc := runSim(ctx, s, 64)
	got := collectRunning(t, ch, errc, 3*n+1)
	var lag time.Duration
	for _, m := range got {
		if m.Kind == KindData && m.Data[0] == 'B' {
			// The Begin's commit time against the XLogData send time, as the reader reads it.
			committed := time.UnixMicro(int64(binary.BigEndian.Uint64(m.Data[9:17])) + 946684800*1e6)
			lag = max(lag, m.ServerTime.Sub(committed))
		}
	}
	if lag < behindLag {
		t.Fatalf("the backlog lagged %s at most, want over %s: the test does not reach the drain mode", lag, behindLag)
	}
	s.Ack(last.EndLSN) // confirmed: the walsender has no reason to send keepalives now
	awaitConfirmed(t, srv, last.EndLSN, 5*time.Second)
	time.Sleep(10 * idleAfter) // quiet: no message at all
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if s.read.tcp == nil {
		t.Fatal("the simwal connection is not TCP: SO_RCVLOWAT does not apply")
	}
	if s.read.lowat {
		t.Errorf("after %d ms without a message the stream still drains (SO_RCVLOWAT raised, 1 ms reads): an idle relay spins", 10*idleAfter/time.Millisecond)
	}
	_ = s.Close(context.Background())
}

// A standby that never streamed waits across a PostgreSQL outage (every connection
// closed at once) instead of exiting, and streams once the server is back and the slot free.
func TestSimStreamStandbyWaitsAcrossAnOutage(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: 20 * time.Millisecond}, time.Second)
	srv.HoldSlot(4242)
	srv.Commit(0, []simwal.Change{row(simwal.OutboxRelation(1), "1")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, errc := runSim(ctx, s, 16)
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			select {
			case err := <-errc:
				t.Fatalf("Run returned %v while %s; a standby that never streamed must keep waiting", err, what)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not reached (state %s)", what, s.State())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	wait("waiting as a standby", func() bool { return s.State() == StateStandby })
	srv.SetDown(true)
	wait("PostgreSQL was down", func() bool { return srv.Refused() >= 3 })
	srv.SetDown(false)
	wait("PostgreSQL was back, the slot still held", func() bool { return s.State() == StateStandby })
	srv.HoldSlot(0)
	collectRunning(t, ch, errc, 4) // Begin, Relation, Insert, Commit
	if ss := srv.Sessions(); len(ss) != 1 {
		t.Errorf("sessions %+v, want the one that streamed", ss)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run after cancel = %v", err)
	}
	_ = s.Close(context.Background())
}

// The final status: a clean stop in the middle of a backlog sends the final status and
// ends the COPY, so the walsender, which handles the client's messages in order, has taken the
// position before the socket closes (closing with unread data resets the connection, and the
// server may drop the status). The slot ends exactly at the stream's flush position.
func TestSimStreamCleanStopEndsTheCopy(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: time.Second})
	rel := simwal.OutboxRelation(16384)
	const n = 2000
	for range n {
		srv.Commit(0, []simwal.Change{row(rel, "1")})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, errc := runSim(ctx, s, 0)
	// Take a few batches, acknowledge up to the last commit seen, stop with the rest unsent.
	var acked pglogrepl.LSN
	for acked == 0 {
		select {
		case b := <-ch:
			for _, m := range b {
				if m.Kind == KindData && m.Data[0] == 'C' {
					acked = pglogrepl.LSN(binary.BigEndian.Uint64(m.Data[10:18])) // TransactionEndLSN
				}
			}
		case err := <-errc:
			t.Fatalf("Run = %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("no commit within 10s")
		}
	}
	s.Ack(acked)
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var end string
	for end == "" && time.Now().Before(deadline) {
		ss := srv.Sessions()
		end = ss[len(ss)-1].End
		time.Sleep(time.Millisecond)
	}
	if end != simwal.EndCopyDone {
		t.Errorf("the session ended by %q, want %q: a clean stop must end the COPY so the server applies the final status", end, simwal.EndCopyDone)
	}
	if c := srv.Confirmed(); c != acked || s.Flushed() != acked {
		t.Errorf("slot at %s, stream flushed %s, want both at %s", c, s.Flushed(), acked)
	}
}
