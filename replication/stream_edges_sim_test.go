package replication

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/simwal"
)

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A network that goes silent with the sockets open (a partition, a NAT that dropped the
// connection) left the stream "streaming" for good: it read with a deadline at its next status
// update, sent the update into the socket's buffer, and read again. Now nothing from the server
// for ReceiveTimeout ends the session with the reason, the state leaves streaming at once, and
// the stream takes the slot again once the silent session's walsender let go of it.
func TestSimStreamEndsASessionWhoseServerWentSilent(t *testing.T) {
	var logs syncLog
	const timeout, hold = 300 * time.Millisecond, 800 * time.Millisecond
	srv, s := simStream(t, Config{StatusInterval: 30 * time.Millisecond, ReceiveTimeout: timeout,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rel := simwal.OutboxRelation(16384)
	srv.Commit(0, []simwal.Change{row(rel, "1")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, errc := runSim(ctx, s, 16)
	collectRunning(t, ch, errc, 3+1)
	srv.Silence(hold)
	silenced := time.Now()
	srv.Commit(0, []simwal.Change{row(rel, "2")})
	for s.State() == StateStreaming {
		if time.Since(silenced) > hold {
			t.Fatalf("still streaming %s after the network went silent (receive timeout %s)", time.Since(silenced), timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	noticed := time.Since(silenced)
	if noticed < timeout-50*time.Millisecond {
		t.Errorf("the session ended %s after the silence, before the receive timeout %s", noticed, timeout)
	}
	// Both rows arrive through a new session (nothing was confirmed), once the silent
	// walsender let go of the slot: Begin, Relation, Insert, Commit, then Begin, Insert, Commit.
	reset, after := false, 0
	for after < 7 {
		for _, m := range collectRunning(t, ch, errc, 1) {
			reset = reset || m.Kind == KindReset
			if reset && m.Kind == KindData {
				after++
			}
		}
	}
	if s.State() != StateStreaming || len(srv.Sessions()) < 2 {
		t.Errorf("state %s, sessions %d after the silence ended: want streaming on a second session", s.State(), len(srv.Sessions()))
	}
	if !strings.Contains(logs.String(), "no message from PostgreSQL for") {
		t.Errorf("the log does not say why the session ended:\n%s", logs.String())
	}
	t.Logf("silent session ended after %s (receive timeout %s)", noticed.Round(time.Millisecond), timeout)
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
	_ = s.Close(context.Background())
}

// A healthy server with nothing to send must never look silent: every heartbeat asks it to
// reply. The fake walsender, like PostgreSQL, sends no keepalive of its own once the client
// has confirmed its WAL end, so without the reply request this session ends every
// ReceiveTimeout.
//
// With a status interval longer than the timeout (an hour here), the heartbeat comes every
// half timeout instead.
func TestSimStreamQuietHealthyServerIsNotSilent(t *testing.T) {
	for _, interval := range []time.Duration{30 * time.Millisecond, time.Hour} {
		t.Run(interval.String(), func(t *testing.T) { quietHealthyServer(t, interval) })
	}
}

func quietHealthyServer(t *testing.T, interval time.Duration) {
	const timeout = 150 * time.Millisecond
	srv, s := simStream(t, Config{StatusInterval: interval, ReceiveTimeout: timeout})
	rel := simwal.OutboxRelation(16384)
	last := srv.Commit(0, []simwal.Change{row(rel, "1")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, errc := runSim(ctx, s, 16)
	collectRunning(t, ch, errc, 3+1)
	s.Ack(last.EndLSN)
	consumed := make(chan struct{})
	go func() { // the consumer: take keepalives and confirm their WAL end, as the relay's idle rule does
		defer close(consumed)
		for {
			select {
			case b := <-ch:
				for _, m := range b {
					if m.Kind == KindKeepalive {
						s.Ack(m.ServerWALEnd)
					}
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { <-consumed }()
	time.Sleep(8 * timeout)
	if n := len(srv.Sessions()); n != 1 || s.Reconnects() != 0 || s.State() != StateStreaming {
		t.Errorf("%d sessions, %d reconnects, state %s over %s of a quiet healthy server: want one streaming session", n, s.Reconnects(), s.State(), 8*timeout)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
	_ = s.Close(context.Background())
}

// A prompt-confirm wake moves the socket's read deadline into the past. It came also while a
// session was being set up (IDENTIFY_SYSTEM, the slot query, START_REPLICATION), failed the
// handshake's read and made the stream reconnect for nothing. Wakes now touch the socket only
// once the session streams.
func TestSimStreamWakeDuringHandshakeDoesNotFailIt(t *testing.T) {
	var logs syncLog
	srv, s := simStream(t, Config{StatusInterval: 30 * time.Millisecond, ConfirmDelay: time.Microsecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	srv.HandshakeDelay = 20 * time.Millisecond // each answer of the handshake takes this long
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	acks := make(chan struct{})
	go func() { // positions move all the time: wakes come during every handshake
		defer close(acks)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
			s.Ack(s.Flushed() + 1)
		}
	}()
	_, errc := runSim(ctx, s, 16)
	deadline := time.Now().Add(5 * time.Second)
	for s.State() != StateStreaming && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // wakes while streaming are handled, not failures
	close(stop)
	<-acks
	if n := len(srv.Sessions()); n != 1 || s.State() != StateStreaming || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("%d sessions, state %s; wakes during the handshake failed it:\n%s", n, s.State(), logs.String())
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
	_ = s.Close(context.Background())
}
