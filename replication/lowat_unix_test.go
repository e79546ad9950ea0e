//go:build unix

package replication

import (
	"syscall"
	"testing"
	"time"
)

// TestAdaptRaisesAndLowersRcvLowat checks the socket option itself on a real TCP socket.
func TestAdaptRaisesAndLowersRcvLowat(t *testing.T) {
	c, _ := loopbackPair(t)
	s := &Stream{tcp: c}
	lowat := func() int {
		rc, err := s.tcp.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		rc.Control(func(fd uintptr) { v, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT) })
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	s.adapt(5 * time.Millisecond) // between the thresholds: no change
	if s.lowat || lowat() != 1 {
		t.Fatalf("raised at a 5ms lag (lowat %d)", lowat())
	}
	s.adapt(time.Second)
	if !s.lowat || lowat() != drainLowat {
		t.Fatalf("behind by 1s: lowat %d, want %d", lowat(), drainLowat)
	}
	s.adapt(5 * time.Millisecond)
	if !s.lowat {
		t.Fatal("lowered between the thresholds")
	}
	s.adapt(time.Millisecond)
	if s.lowat || lowat() != 1 {
		t.Fatalf("caught up: lowat %d, want 1", lowat())
	}
}
