// Package memnet is an in-memory network for the simulation on virtual time: listeners by
// port on 127.0.0.1 and connections whose each direction is a bounded byte queue, as a TCP
// socket's buffers are. It stands where kfake.VirtualNetwork's net.Pipe would: a net.Pipe has
// no buffer, so every Write waits until the peer has read all of it, and a length read then a
// body read cost two hand-overs between the goroutines; here a Write returns once its bytes
// are queued (it waits only while the queue is full), and a Read takes what is queued.
//
// Every wait is on a channel or a timer made by the caller, so inside a testing/synctest bubble
// a goroutine blocked in Read, Write, Accept or Dial is durably blocked, and deadlines run on
// the bubble's clock.
package memnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// queueSize is how many bytes a direction of a connection holds unread before Write waits:
// about a loopback socket's default send and receive buffers together.
const queueSize = 256 << 10

// Network is a set of listeners, each on a port of 127.0.0.1. The zero value is ready.
type Network struct {
	mu        sync.Mutex
	listeners map[int]*listener
}

// Listen listens on address (127.0.0.1, localhost or no host, and a port), as net.Listen.
func (n *Network) Listen(_, address string) (net.Listener, error) {
	port, err := localPort(address, true)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.listeners[port]; ok {
		return nil, fmt.Errorf("memnet: listen on %s: port %d already in use", address, port)
	}
	if n.listeners == nil {
		n.listeners = map[int]*listener{}
	}
	l := &listener{n: n, port: port, conns: make(chan net.Conn), closed: make(chan struct{})}
	n.listeners[port] = l
	return l, nil
}

// DialContext connects to a listener of the network, as net.Dialer.DialContext: it returns
// once the listener accepted the connection, or fails as a refused or canceled dial.
func (n *Network) DialContext(ctx context.Context, _, address string) (net.Conn, error) {
	port, err := localPort(address, false)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	l := n.listeners[port]
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: addr(port), Err: errors.New("connection refused")}
	if l == nil {
		return nil, refused
	}
	server, client := Pipe(port)
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
	case <-ctx.Done():
		refused.Err = ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, refused
}

func localPort(address string, listen bool) (int, error) {
	host, p, err := net.SplitHostPort(address)
	if err != nil {
		return 0, fmt.Errorf("memnet: %q: %w", address, err)
	}
	if host != "127.0.0.1" && host != "localhost" && (host != "" || !listen) {
		return 0, fmt.Errorf("memnet: %q: only 127.0.0.1 and localhost are on this network", address)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return 0, fmt.Errorf("memnet: %q: port: %w", address, err)
	}
	return port, nil
}

type listener struct {
	n         *Network
	port      int
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: addr(l.port), Err: net.ErrClosed}
	}
}

func (l *listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.n.mu.Lock()
		delete(l.n.listeners, l.port)
		l.n.mu.Unlock()
	})
	return nil
}

func (l *listener) Addr() net.Addr { return addr(l.port) }

// addr is 127.0.0.1:port.
type addr int

func (addr) Network() string  { return "tcp" }
func (a addr) String() string { return "127.0.0.1:" + strconv.Itoa(int(a)) }

// Pipe is a connected pair of connections, the server's end first, its local address port.
func Pipe(port int) (server, client net.Conn) {
	toServer, toClient := newQueue(), newQueue()
	s := &conn{in: toServer, out: toClient, local: addr(port), remote: addr(0), done: make(chan struct{}),
		rd: newDeadline(), wd: newDeadline()}
	c := &conn{in: toClient, out: toServer, local: addr(0), remote: addr(port), done: make(chan struct{}),
		rd: newDeadline(), wd: newDeadline()}
	return s, c
}

// queue is one direction of a connection: the bytes written and not yet read.
type queue struct {
	mu       sync.Mutex
	buf      []byte
	eof      bool          // the writer closed: reads end with io.EOF once buf is empty
	gone     bool          // the reader closed: writes fail
	readable chan struct{} // a token once bytes were queued or eof set
	writable chan struct{} // a token once bytes were taken or gone set
}

func newQueue() *queue {
	return &queue{readable: make(chan struct{}, 1), writable: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

type conn struct {
	in, out       *queue
	local, remote net.Addr
	done          chan struct{} // closed by Close
	closeOnce     sync.Once
	rd, wd        *deadline
}

var errClosed = net.ErrClosed

func (c *conn) Read(b []byte) (int, error) {
	for {
		if err := c.check(c.rd); err != nil {
			return 0, c.opErr("read", err)
		}
		q := c.in
		q.mu.Lock()
		if len(q.buf) > 0 {
			n := copy(b, q.buf)
			q.buf = q.buf[n:]
			if len(q.buf) == 0 {
				q.buf = nil
			} else {
				signal(q.readable) // for another reader
			}
			q.mu.Unlock()
			signal(q.writable)
			return n, nil
		}
		eof := q.eof
		q.mu.Unlock()
		if eof {
			return 0, io.EOF
		}
		if len(b) == 0 {
			return 0, nil
		}
		select {
		case <-q.readable:
		case <-c.rd.wait():
		case <-c.done:
		}
	}
}

func (c *conn) Write(b []byte) (int, error) {
	n := 0
	for {
		if err := c.check(c.wd); err != nil {
			return n, c.opErr("write", err)
		}
		q := c.out
		q.mu.Lock()
		if q.gone {
			q.mu.Unlock()
			return n, c.opErr("write", errors.New("broken pipe"))
		}
		if room := queueSize - len(q.buf); room > 0 {
			k := min(room, len(b))
			q.buf = append(q.buf, b[:k]...)
			b = b[k:]
			n += k
		}
		q.mu.Unlock()
		if n > 0 {
			signal(q.readable)
		}
		if len(b) == 0 {
			return n, nil
		}
		select {
		case <-q.writable:
		case <-c.wd.wait():
		case <-c.done:
		}
	}
}

// check is the error a read or write (by d's deadline) meets before it starts, nil if none.
func (c *conn) check(d *deadline) error {
	select {
	case <-c.done:
		return errClosed
	default:
	}
	select {
	case <-d.wait():
		return os.ErrDeadlineExceeded
	default:
	}
	return nil
}

func (c *conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}

// Close ends both directions: the peer reads what was queued and then io.EOF, and its writes
// fail; this end's blocked reads and writes return.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		c.out.mu.Lock()
		c.out.eof = true
		c.out.mu.Unlock()
		signal(c.out.readable)
		c.in.mu.Lock()
		c.in.gone, c.in.buf = true, nil
		c.in.mu.Unlock()
		signal(c.in.writable)
	})
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// deadline is a channel closed when the time set passes (net.Pipe's pipeDeadline, Go's
// net/pipe.go).
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
}

func newDeadline() *deadline { return &deadline{cancel: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait for its close
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
