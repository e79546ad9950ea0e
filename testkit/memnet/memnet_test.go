package memnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

func dialed(t *testing.T) (server, client net.Conn) {
	t.Helper()
	var n Network
	ln, err := n.Listen("tcp", "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err = n.DialContext(context.Background(), "tcp", "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestWriteReturnsOnceQueuedAndTheReaderGetsItInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := dialed(t)
		// Below the queue's size a write does not wait for a reader (a net.Pipe would block).
		if _, err := c.Write([]byte("hello ")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("world")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 11)
		if _, err := io.ReadFull(s, got); err != nil || string(got) != "hello world" {
			t.Fatalf("read %q, %v; want %q", got, err, "hello world")
		}
	})
}

func TestAWriteBeyondTheQueueWaitsForTheReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := dialed(t)
		want := bytes.Repeat([]byte("0123456789abcdef"), 3*queueSize/16)
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write(want)
			wrote <- err
		}()
		synctest.Wait()
		select {
		case err := <-wrote:
			t.Fatalf("a write of three queues' worth returned (%v) before anything was read", err)
		default:
		}
		got := make([]byte, len(want))
		if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes (equal %v), %v", len(got), bytes.Equal(got, want), err)
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
	})
}

func TestAReadDeadlineEndsAWaitingReadOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := dialed(t)
		began := time.Now()
		_ = s.SetReadDeadline(began.Add(10 * time.Second))
		_, err := s.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v, want a deadline exceeded", err)
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("read: %v is not a net.Error timeout", err)
		}
		if took := time.Since(began); took != 10*time.Second {
			t.Fatalf("the read ended after %s, want 10s", took)
		}
		// A deadline in the past ends a read even with bytes queued (as a socket's does); cleared,
		// the read gets them.
		_ = s.SetReadDeadline(time.Unix(1, 0))
		go s.(*conn).peerWrite(t, "x")
		synctest.Wait()
		if _, err := s.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past its deadline: %v", err)
		}
		_ = s.SetReadDeadline(time.Time{})
		if b := make([]byte, 1); func() error { _, err := s.Read(b); return err }() != nil || string(b) != "x" {
			t.Fatalf("read after the deadline was cleared: %q", b)
		}
	})
}

// peerWrite writes to the peer's side of c's connection, as the peer would.
func (c *conn) peerWrite(t *testing.T, s string) {
	peer := &conn{in: c.out, out: c.in, done: make(chan struct{}), rd: newDeadline(), wd: newDeadline()}
	if _, err := peer.Write([]byte(s)); err != nil {
		t.Error(err)
	}
}

func TestCloseHandsThePeerWhatWasQueuedThenEOF(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := dialed(t)
		blocked := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			blocked <- err
		}()
		synctest.Wait()
		if _, err := s.Write([]byte("last")); err != nil {
			t.Fatal(err)
		}
		if err := <-blocked; err != nil {
			t.Fatalf("the waiting read: %v", err)
		}
		s.Close()
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "ast" {
			t.Fatalf("after the peer closed: read %q, %v; want %q then EOF", got, err, "ast")
		}
		if _, err := c.Write([]byte("x")); err == nil {
			t.Fatal("a write to a closed peer succeeded")
		}
		if _, err := s.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a read of a closed connection: %v, want net.ErrClosed", err)
		}
	})
}

func TestADialWithoutAListenerIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n Network
		if _, err := n.DialContext(context.Background(), "tcp", "127.0.0.1:5432"); err == nil {
			t.Fatal("dialed a port nobody listens on")
		}
		ln, err := n.Listen("tcp", "127.0.0.1:5432")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Listen("tcp", "127.0.0.1:5432"); err == nil {
			t.Fatal("listened twice on one port")
		}
		ln.Close()
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept on a closed listener: %v", err)
		}
		if _, err := n.DialContext(context.Background(), "tcp", "127.0.0.1:5432"); err == nil {
			t.Fatal("dialed a closed listener")
		}
		if _, err := n.Listen("tcp", "10.0.0.1:1"); err == nil {
			t.Fatal("listened on an address not on the network")
		}
	})
}
