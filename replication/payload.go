package replication

import (
	"math/bits"
	"sync"
)

// Payloads. pgconn reuses its read buffer, so each XLogData payload is copied out of it before
// it crosses to the consumer. A payload larger than minPooled is copied into a buffer of the
// stream's pool instead of a new allocation, and the consumer hands the buffer back (Lease)
// once nothing reads the payload any more: a drain of large rows then writes the same few
// megabytes over and over instead of new memory (a page fault, a GC cycle) for every row.
// A payload that is never handed back is garbage, as every payload used to be: handing back
// is what saves an allocation, never what frees memory. DESIGN.md, "pgconn reuses its read
// buffer", has the rule on the consumer's side.
const (
	minPooled   = 1 << 10 // payloads of this size or less are allocated, as before
	maxPooled   = 1 << 20 // and those larger than this
	classesPer  = 8       // classes per power of two: a buffer is at most 1/8 larger than its payload
	minShift    = 10      // log2(minPooled)
	poolClasses = (20 - minShift) * classesPer
	poolBytes   = 8 << 20 // free buffers the pool keeps at most, in bytes of capacity
)

// payloadPool lends the stream's payload buffers: a free list per size class, bounded in bytes.
// The stream's goroutine takes from it; whichever goroutine is done with a payload (a Kafka
// promise) gives back: mu guards it.
type payloadPool struct {
	mu   sync.Mutex
	free [poolClasses][][]byte
	held int // bytes of capacity in free
}

// class returns the size class of a payload of n bytes (minPooled < n <= maxPooled) and the
// buffer size of the class: n rounded up to an eighth of the power of two at or above it.
func class(n int) (int, int) {
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n <= 2^k
	step := 1 << (k - 4)
	size := (n + step - 1) &^ (step - 1)
	return (k-minShift-1)*classesPer + size/step - classesPer - 1, size
}

// get returns a slice of n bytes to copy a payload into, whose capacity is its buffer's (what
// put takes back), and the pool to give it back to: nil when it is not pooled. Its contents are
// whatever the buffer held before.
func (p *payloadPool) get(n int) ([]byte, *payloadPool) {
	if n <= minPooled || n > maxPooled {
		return make([]byte, n), nil
	}
	c, size := class(n)
	p.mu.Lock()
	if free := p.free[c]; len(free) > 0 {
		b := free[len(free)-1]
		free[len(free)-1] = nil
		p.free[c] = free[:len(free)-1]
		p.held -= cap(b)
		p.mu.Unlock()
		return b[:n], p
	}
	p.mu.Unlock()
	return make([]byte, n, size), p
}

// put takes a buffer back, or drops it (to the garbage collector) when the pool is full.
func (p *payloadPool) put(b []byte) {
	if poisonReleased {
		for i := range b {
			b[i] = 0xEE // a payload read after its release reads garbage (the race build's tests)
		}
	}
	c, _ := class(cap(b))
	p.mu.Lock()
	if p.held+cap(b) <= poolBytes {
		p.free[c] = append(p.free[c], b[:cap(b)])
		p.held += cap(b)
	}
	p.mu.Unlock()
}

// Lease is the loan of a Message's Data from the stream's payload pool: Release gives the
// buffer back for a later payload. The zero Lease (a small or very large payload, or one not
// read by a Stream) releases nothing.
type Lease struct {
	pool *payloadPool
	buf  []byte
}

// Release gives the payload's buffer back to the stream. Call it only once nothing reads the
// message's Data, nor any slice of it, any more, whichever goroutine that was on (a decoded
// event's payload is the Kafka record's value: its promise is that moment, if it succeeded),
// and at most once: the next payload of its size overwrites the buffer. Never calling it is
// always safe.
func (l Lease) Release() {
	if l.pool != nil {
		l.pool.put(l.buf)
	}
}

// TakeLease returns the lease of m's Data and removes it from m, so that the Data is given
// back at most once, by the holder of the returned Lease.
func (m *Message) TakeLease() Lease {
	if m.pool == nil {
		return Lease{}
	}
	l := Lease{pool: m.pool, buf: m.Data[:cap(m.Data)]}
	m.pool = nil
	return l
}
