package replication

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Pacing a backlog read (DESIGN.md, "Reading a backlog").
//
// On a connection to the same host, the walsender pays for the receive path of every TCP
// segment it sends, and it sends one segment per message unless it is blocked. It is blocked
// only while the relay reads more slowly than it sends: then its messages pile up into 64 KiB
// segments and it costs half as much CPU per transaction. A relay that reads as fast as it can
// lets it fall into the per-message mode, which it does not leave by itself. So while draining
// a backlog from the same host, the stream reads at a paced rate that a controller keeps just
// below what the walsender can send, judged by the size of the segments that arrive.

const (
	pacePeriod   = 25 * time.Millisecond // how often the controller looks
	paceStart    = 16e6                  // bytes/s: below a per-message walsender, so it blocks
	paceMin      = 2e6                   // bytes/s
	paceMax      = 1e9                   // bytes/s
	paceCredit   = 2 * time.Millisecond  // unused rate that a late read may catch up
	paceBigSeg   = 8000                  // bytes per segment from which the walsender is blocked
	paceSmallSeg = 2000                  // bytes per segment under which it sends one per message
	paceFewSegs  = 20                    // segments per period under which it is blocked anyway
)

// paceWindow is what the controller sees of one period.
type paceWindow struct {
	segs  uint32  // TCP segments received
	bytes uint64  // bytes received
	got   float64 // bytes/s the stream read
}

// paceCtl sets the read rate. Until the walsender first falls into the per-message mode it
// doubles the rate each period the walsender stays blocked; that point, less 15 %, becomes a
// ceiling that later periods approach (×1.25, to 90 % of it) and slowly probe (+0.5 % a
// period). A fall lowers the ceiling by 10 % and the rate to a quarter of it, so the walsender
// blocks again within a period or two.
type paceCtl struct {
	rate    float64 // bytes/s the stream may read
	ceiling float64 // bytes/s; 0 until the first fall
	best    float64 // highest rate read since the last fall
}

func (c *paceCtl) step(w paceWindow) {
	if c.rate == 0 {
		c.rate = paceStart
	}
	perSeg := 0.0
	if w.segs > 0 {
		perSeg = float64(w.bytes) / float64(w.segs)
	}
	switch {
	case w.segs < paceFewSegs || perSeg >= paceBigSeg: // blocked: the walsender is ahead
		c.best = max(c.best, w.got)
		if w.got < 0.8*c.rate {
			break // the stream was not held back by the rate (Kafka, the pipeline): do not raise it
		}
		if c.ceiling > 0 {
			c.ceiling *= 1.005
			c.rate = min(c.rate*1.25, 0.9*c.ceiling)
		} else {
			c.rate *= 2
		}
	case perSeg < paceSmallSeg: // fallen into a segment per message
		if c.ceiling > 0 {
			c.ceiling *= 0.9
		} else if c.best > 0 {
			c.ceiling = 0.85 * c.best
		}
		c.best = 0
		if c.ceiling > 0 {
			c.rate = 0.25 * c.ceiling
		} else {
			c.rate *= 0.5
		}
	}
	c.rate = min(max(c.rate, paceMin), paceMax)
	if c.ceiling > 0 {
		c.ceiling = max(c.ceiling, paceMin)
	}
}

// pacer rate-limits reads with a paceCtl; counters reads the connection's received bytes
// and segments.
type pacer struct {
	ctl      paceCtl
	on       bool
	start    time.Time // current period
	read     float64   // bytes read in it
	due      time.Time // when the bytes read so far are paid for at ctl.rate
	bytes    uint64    // counters at the period's start
	segs     uint32
	counters func() (bytes uint64, segs uint32, ok bool)
}

// wait returns how long to wait before reading at now, starting the pacer if it was off
// and stepping the controller at the end of each period.
func (p *pacer) wait(now time.Time) time.Duration {
	if !p.on {
		p.on, p.ctl, p.start, p.read, p.due = true, paceCtl{rate: paceStart}, now, 0, now
		p.bytes, p.segs, _ = p.counters()
	}
	if el := now.Sub(p.start); el >= pacePeriod {
		b, s, ok := p.counters()
		if ok {
			p.ctl.step(paceWindow{segs: s - p.segs, bytes: b - p.bytes, got: p.read / el.Seconds()})
		}
		p.start, p.read, p.bytes, p.segs = now, 0, b, s
	}
	if p.due.Before(now.Add(-paceCredit)) {
		p.due = now.Add(-paceCredit)
	}
	return p.due.Sub(now)
}

// account charges n bytes read.
func (p *pacer) account(n int) {
	p.read += float64(n)
	p.due = p.due.Add(time.Duration(float64(n) / p.ctl.rate * float64(time.Second)))
}

// pacedReader sits under pgproto3's reader and paces it while the stream says so.
type pacedReader struct {
	r      io.Reader
	pacing func() bool
	total  *atomic.Int64 // bytes read paced, for the metric
	p      pacer
}

func (r *pacedReader) Read(b []byte) (int, error) {
	if !r.pacing() {
		r.p.on = false
		return r.r.Read(b)
	}
	if d := r.p.wait(time.Now()); d > 20*time.Microsecond {
		nap(d)
	}
	n, err := r.r.Read(b)
	r.p.account(n)
	r.total.Add(int64(n))
	return n, err
}

// sameHost reports whether c connects two addresses of this host, where the walsender pays
// for the relay's side of TCP too.
func sameHost(c *net.TCPConn) bool {
	l, lok := c.LocalAddr().(*net.TCPAddr)
	r, rok := c.RemoteAddr().(*net.TCPAddr)
	return lok && rok && (r.IP.IsLoopback() || r.IP.Equal(l.IP))
}
