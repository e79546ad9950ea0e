package replication

import (
	"fmt"
	"testing"
	"unsafe"
)

// A pooled payload's buffer is at most an eighth larger than the payload, so that a drain's
// memory (franz-go counts the payloads' lengths against its limits) is about what it was with
// a buffer of its own per payload; every size maps to one class, whose size holds it.
func TestPayloadClassesWasteAtMostAnEighth(t *testing.T) {
	prev, prevSize := -1, 0
	for n := minPooled + 1; n <= maxPooled; n++ {
		c, size := class(n)
		if c < 0 || c >= poolClasses {
			t.Fatalf("class(%d) = %d, outside [0, %d)", n, c, poolClasses)
		}
		if size < n || size-n > n/8 {
			t.Fatalf("class(%d): buffer of %d bytes", n, size)
		}
		if c2, size2 := class(size); c2 != c || size2 != size {
			t.Fatalf("class(%d) = %d (%d bytes), but its buffer's size is in class %d (%d bytes)", n, c, size, c2, size2)
		}
		switch {
		case c == prev && size != prevSize, c != prev && (c != prev+1 || size <= prevSize):
			t.Fatalf("class(%d) = %d (%d bytes) after class %d (%d bytes)", n, c, size, prev, prevSize)
		}
		prev, prevSize = c, size
	}
	if prev != poolClasses-1 {
		t.Fatalf("the last class is %d, want %d", prev, poolClasses-1)
	}
}

// A buffer given back is lent again for the next payload of its class, once, and a lease is
// taken from its message once: a second TakeLease gives back nothing, so that no buffer is in
// the pool twice (two payloads in one buffer). Small and very large payloads are not pooled.
func TestPayloadPoolLendsAGivenBackBufferOnce(t *testing.T) {
	var p payloadPool
	data, pool := p.get(10 << 10)
	copy(data, "payload")
	m := Message{Kind: KindData, Data: data[:5], pool: pool} // a receiver may reslice Data
	m.TakeLease().Release()
	m.TakeLease().Release() // nothing: the lease was taken
	if poisonReleased && string(data[:7]) == "payload" {
		t.Errorf("a released buffer keeps its payload in the race build: a read after the release would go unnoticed")
	}
	again, _ := p.get(10<<10 - 100) // same class
	if unsafe.SliceData(again) != unsafe.SliceData(data) {
		t.Fatalf("the buffer given back was not lent again")
	}
	third, _ := p.get(10 << 10)
	if unsafe.SliceData(third) == unsafe.SliceData(data) {
		t.Fatalf("a buffer released once was lent twice")
	}
	for _, n := range []int{1, minPooled, maxPooled + 1} {
		if b, pool := p.get(n); len(b) != n || pool != nil {
			t.Errorf("get(%d): %d bytes, pooled %v; want %d bytes, not pooled", n, len(b), pool != nil, n)
		}
	}
}

// The pool keeps at most poolBytes of free buffers, whatever is given back: the rest is garbage.
func TestPayloadPoolKeepsAtMostPoolBytes(t *testing.T) {
	var p payloadPool
	var leases []Lease
	for range 2 * poolBytes / (64 << 10) {
		data, pool := p.get(64 << 10)
		m := Message{Data: data, pool: pool}
		leases = append(leases, m.TakeLease())
	}
	for _, l := range leases {
		l.Release()
	}
	if p.held > poolBytes || p.held < poolBytes-(72<<10) {
		t.Fatalf("the pool holds %d bytes after %d bytes came back, want at most %d (and about that)", p.held, len(leases)*(64<<10), poolBytes)
	}
}

// BenchmarkPayloadCopy is the stream's copy of an XLogData payload out of pgconn's buffer with
// a drain's worth of payloads in flight (held until Kafka would acknowledge them, then given
// back): into a new allocation each, as before the pool, and into the pool's buffers:
//
//	go test -run '^$' -bench PayloadCopy -count 5 ./replication
func BenchmarkPayloadCopy(b *testing.B) {
	const inflight = 600 // about the live heap of a 10 KB drain (6 MB)
	for _, size := range []int{147, 10 << 10} {
		src := make([]byte, size)
		b.Run(fmt.Sprintf("%dB/allocated", size), func(b *testing.B) {
			held := make([][]byte, inflight)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				data := make([]byte, size)
				copy(data, src)
				held[i%inflight] = data // the one it replaces is garbage
				i++
			}
		})
		b.Run(fmt.Sprintf("%dB/pooled", size), func(b *testing.B) {
			var p payloadPool
			held := make([]Lease, inflight)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				data, pool := p.get(size)
				copy(data, src)
				m := Message{Data: data, pool: pool}
				held[i%inflight].Release()
				held[i%inflight] = m.TakeLease()
				i++
			}
		})
	}
}
