package replication

import (
	"context"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/simwal"
)

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{StateConnecting: "connecting", StateStreaming: "streaming", StateStandby: "standby",
		StateReconnecting: "reconnecting", StateStopped: "stopped", State(99): "unknown"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
}

// A backlog committed well before it is sent (lag over behindLag) is drained in batches, with
// SO_RCVLOWAT raised; and while the consumer does not
// take a batch, status updates keep flowing (the walsender would otherwise time out).
func TestSimStreamDrainsBacklogAndKeepsStatusWhileBlocked(t *testing.T) {
	srv, s := simStream(t, Config{StatusInterval: 10 * time.Millisecond})
	rel := simwal.OutboxRelation(16384)
	const n = 3000
	for i := range n {
		srv.Commit(0, []simwal.Change{row(rel, string(rune('a'+i%26)))})
	}
	time.Sleep(30 * time.Millisecond) // the backlog is now 30 ms old: the stream is behind
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan []Message) // unbuffered: the stream blocks in forward until we read
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx, ch) }()
	first := <-ch
	before := len(srv.Statuses())
	time.Sleep(60 * time.Millisecond) // not reading: forward must keep sending status updates
	if got := len(srv.Statuses()) - before; got < 2 {
		t.Errorf("%d status updates while the consumer was blocked for 60ms (interval 10ms)", got)
	}
	data, batches := 0, 1
	for _, m := range first {
		if m.Kind == KindData {
			data++
		}
	}
	deadline := time.After(20 * time.Second)
	for data < 3*n+1 {
		select {
		case b := <-ch:
			batches++
			for _, m := range b {
				if m.Kind == KindData {
					data++
				}
			}
		case <-deadline:
			t.Fatalf("%d of %d messages", data, 3*n+1)
		}
	}
	if batches >= data {
		t.Errorf("%d messages in %d batches: a backlog should come in batches", data, batches)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
	_ = s.Close(context.Background())
}
