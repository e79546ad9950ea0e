package replication

import (
	"math"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(math.Abs(a), math.Abs(b)) }

// The controller doubles the rate while the walsender stays blocked, takes the rate at which
// it fell into per-message segments (less 15 %) as a ceiling, drops to a quarter of that so it
// blocks again, then climbs back to 90 % of the ceiling, which it lowers at each new fall.
func TestPaceCtl(t *testing.T) {
	blocked := func(got float64) paceWindow { return paceWindow{segs: 40, bytes: 40 * 60000, got: got} }
	fallen := func(got float64) paceWindow { return paceWindow{segs: 5000, bytes: 5000 * 200, got: got} }

	var c paceCtl
	c.step(blocked(paceStart))
	if !near(c.rate, 2*paceStart) || c.ceiling != 0 {
		t.Fatalf("blocked at the start rate: rate %g ceiling %g, want %g and none", c.rate, c.ceiling, 2*paceStart)
	}
	c.step(blocked(c.rate))
	c.step(blocked(c.rate)) // read 64 MB/s, rate 128
	if !near(c.rate, 8*paceStart) {
		t.Fatalf("rate %g, want %g", c.rate, 8*paceStart)
	}
	c.step(fallen(100e6))
	if !near(c.ceiling, 0.85*64e6) || !near(c.rate, 0.25*0.85*64e6) {
		t.Fatalf("after the fall: ceiling %g rate %g, want %g and %g", c.ceiling, c.rate, 0.85*64e6, 0.25*0.85*64e6)
	}
	ceil := c.ceiling
	for range 20 {
		c.step(blocked(c.rate))
	}
	ceil *= math.Pow(1.005, 20)
	if !near(c.ceiling, ceil) || !near(c.rate, 0.9*ceil) {
		t.Fatalf("climbing back: ceiling %g rate %g, want %g and %g", c.ceiling, c.rate, ceil, 0.9*ceil)
	}

	// Held back by something else (Kafka), a blocked walsender does not raise the rate.
	r := c.rate
	c.step(blocked(0.5 * r))
	if c.rate != r {
		t.Fatalf("rate %g raised while the stream read only half of it", c.rate)
	}
	// Middling segments: hold.
	c.step(paceWindow{segs: 100, bytes: 100 * 4000, got: r})
	if c.rate != r {
		t.Fatalf("rate %g changed on 4000-byte segments", c.rate)
	}
	// A second fall lowers the ceiling by 10 %.
	ceil = c.ceiling
	c.step(fallen(r))
	if !near(c.ceiling, 0.9*ceil) || !near(c.rate, 0.25*0.9*ceil) {
		t.Fatalf("second fall: ceiling %g rate %g, want %g and %g", c.ceiling, c.rate, 0.9*ceil, 0.25*0.9*ceil)
	}

	// Fallen from the start, before any blocked period: halve, never under paceMin.
	var d paceCtl
	for range 20 {
		d.step(fallen(1e6))
	}
	if d.rate != paceMin || d.ceiling != 0 {
		t.Fatalf("fallen throughout: rate %g ceiling %g, want %g and none", d.rate, d.ceiling, float64(paceMin))
	}
}

// The pacer lets the bytes read so far cost size ÷ rate, forgives no more than paceCredit of
// unused time, and steps the controller once per period with the counters' differences.
func TestPacerWait(t *testing.T) {
	var bytes uint64
	var segs uint32
	p := pacer{counters: func() (uint64, uint32, bool) { return bytes, segs, true }}
	t0 := time.Unix(1000, 0)
	if d := p.wait(t0); d != 0 {
		t.Fatalf("first wait %v, want 0", d)
	}
	p.account(16000) // 1 ms at 16 MB/s
	if d := p.wait(t0); d != time.Millisecond {
		t.Fatalf("wait after 16 kB at 16 MB/s: %v, want 1ms", d)
	}
	if d := p.wait(t0.Add(400 * time.Microsecond)); d != 600*time.Microsecond {
		t.Fatalf("wait 0.4 ms later: %v, want 0.6ms", d)
	}
	// Idle for 10 ms: only paceCredit of it may be caught up.
	if d := p.wait(t0.Add(10 * time.Millisecond)); d != -paceCredit {
		t.Fatalf("wait after idling: %v, want %v", d, -paceCredit)
	}
	// A period of big segments, the rate fully used: the controller doubles it.
	bytes, segs = 16e6*uint64(pacePeriod)/uint64(time.Second), 10
	p.read = 16e6 * pacePeriod.Seconds()
	p.wait(t0.Add(pacePeriod))
	if !near(p.ctl.rate, 2*paceStart) {
		t.Fatalf("rate after a blocked period: %g, want %g", p.ctl.rate, 2*paceStart)
	}
	if p.read != 0 || p.bytes != bytes || p.segs != segs {
		t.Fatalf("period not restarted: read %g, counters %d/%d", p.read, p.bytes, p.segs)
	}
}

// A connection to 127.0.0.1 is to this host.
func TestSameHost(t *testing.T) {
	c, _ := loopbackPair(t)
	if !sameHost(c) {
		t.Error("127.0.0.1 is not this host")
	}
}
