package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a target and can make the network go silent: Silence
// stops forwarding on every connection open at that moment, both ways, while keeping both
// sockets open, as a partition or a NAT that dropped the connections' state does. Connections
// made afterwards are forwarded as usual. Stall does the same and also silences every
// connection made until Resume: a partition that lasts.
type Proxy struct {
	ln     net.Listener
	target string
	closed chan struct{}
	// chunks, when set, cuts each connection's two directions into the units it forwards and
	// may rewrite them (KafkaProxy's frames); nil forwards bytes as they come.
	chunks func() (up, down chunker)

	mu      sync.Mutex
	stalled bool
	open    []*proxied // forwarding
	all     []*proxied
}

// chunker reads the next unit to forward from src (what it returns is forwarded even with an
// error, which ends the direction).
type chunker func(src io.Reader) ([]byte, error)

type proxied struct {
	a, b   net.Conn
	silent chan struct{} // closed by Silence
}

// NewProxy listens on 127.0.0.1 and forwards to target (host:port) until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return newProxy(t, target, nil)
}

func newProxy(t testing.TB, target string, chunks func() (up, down chunker)) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, closed: make(chan struct{}), chunks: chunks}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Silence stops forwarding on the open connections and returns how many there were.
func (p *Proxy) Silence() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.open {
		close(c.silent)
	}
	n := len(p.open)
	p.open = nil
	return n
}

// Stall silences the open connections (Silence) and every connection accepted until Resume,
// and returns how many were open.
func (p *Proxy) Stall() int {
	n := p.Silence()
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
	return n
}

// Resume ends a Stall: connections accepted from now on are forwarded. Those silenced stay
// silent, as connections whose state a partition dropped do; their clients must reconnect.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.stalled = false
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		a, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			a.Close()
			continue
		}
		c := &proxied{a: a, b: b, silent: make(chan struct{})}
		p.mu.Lock()
		if p.stalled {
			close(c.silent)
		} else {
			p.open = append(p.open, c)
		}
		p.all = append(p.all, c)
		p.mu.Unlock()
		up, down := rawChunker(), rawChunker()
		if p.chunks != nil {
			up, down = p.chunks()
		}
		go p.pipe(c, a, b, down)
		go p.pipe(c, b, a, up)
	}
}

func rawChunker() chunker {
	buf := make([]byte, 32<<10)
	return func(src io.Reader) ([]byte, error) {
		n, err := src.Read(buf)
		return buf[:n], err
	}
}

// pipe copies from src to dst. Once silenced it forwards nothing more and stops reading (what
// it read meanwhile is lost, as a dropped packet is) but closes nothing until the proxy closes.
// A connection that ends while forwarding ends on the other side too.
func (p *Proxy) pipe(c *proxied, dst, src net.Conn, next chunker) {
	for {
		data, err := next(src)
		select {
		case <-c.silent:
			<-p.closed
			return
		default:
		}
		if len(data) > 0 {
			if _, werr := dst.Write(data); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *Proxy) close() {
	close(p.closed)
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.all {
		c.a.Close()
		c.b.Close()
	}
}
