package testenv

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a target and can make the network go silent: Silence
// stops forwarding on every connection open at that moment, both ways, while keeping both
// sockets open, as a partition or a NAT that dropped the connections' state does. Connections
// made afterwards are forwarded as usual.
type Proxy struct {
	ln     net.Listener
	target string
	closed chan struct{}

	mu   sync.Mutex
	open []*proxied // forwarding
	all  []*proxied
}

type proxied struct {
	a, b   net.Conn
	silent chan struct{} // closed by Silence
}

// NewProxy listens on 127.0.0.1 and forwards to target (host:port) until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, closed: make(chan struct{})}
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
		p.open = append(p.open, c)
		p.all = append(p.all, c)
		p.mu.Unlock()
		go p.pipe(c, a, b)
		go p.pipe(c, b, a)
	}
}

// pipe copies from src to dst. Once silenced it forwards nothing more and stops reading (what
// it read meanwhile is lost, as a dropped packet is) but closes nothing until the proxy closes.
// A connection that ends while forwarding ends on the other side too.
func (p *Proxy) pipe(c *proxied, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-c.silent:
			<-p.closed
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
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
