//go:build linux

package replication

import (
	"io"
	"testing"
)

// The pacer's view of a connection: the bytes and segments it has received.
func TestTCPCounters(t *testing.T) {
	c, srv := loopbackPair(t)
	wrote := make(chan error, 1)
	go func() { _, err := srv.Write(make([]byte, 100_000)); wrote <- err }()
	if _, err := io.ReadFull(c, make([]byte, 100_000)); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	bytes, segs, ok := tcpCounters(c)
	if !ok || bytes < 100_000 || segs == 0 {
		t.Fatalf("counters %d bytes, %d segments, ok %v; want ≥ 100000 bytes", bytes, segs, ok)
	}
}
