//go:build linux

package replication

import (
	"io"
	"net"
	"testing"
)

// The pacer's view of a connection: the bytes and segments it has received.
func TestTCPCounters(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		s, err := ln.Accept()
		if err == nil {
			_, err = s.Write(make([]byte, 100_000))
			s.Close()
		}
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, 100_000)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	bytes, segs, ok := tcpCounters(c.(*net.TCPConn))
	if !ok || bytes < 100_000 || segs == 0 {
		t.Fatalf("counters %d bytes, %d segments, ok %v; want ≥ 100000 bytes", bytes, segs, ok)
	}
}
