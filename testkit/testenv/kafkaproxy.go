package testenv

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaProxy puts a Proxy in front of every broker of a Kafka cluster for one client: a
// client's connections all go through it, not only its seed connections, because the proxy
// rewrites the broker addresses of the responses that name them (Metadata, FindCoordinator,
// DescribeCluster) to the proxies' own. Stall and Resume act on all of them, so a test can cut
// one relay off Kafka while other clients reach the same brokers directly.
type KafkaProxy struct {
	t     testing.TB
	seeds []string

	mu      sync.Mutex
	stalled bool
	brokers map[string]*Proxy // broker address -> its proxy
}

// NewKafkaProxy proxies the brokers of the cluster CDC_RELAY_BROKERS names until the test ends.
func NewKafkaProxy(t testing.TB) *KafkaProxy {
	t.Helper()
	k := &KafkaProxy{t: t, brokers: map[string]*Proxy{}}
	for _, b := range Brokers(t) {
		k.seeds = append(k.seeds, k.proxy(b).Addr())
	}
	return k
}

// Brokers is the proxied seed list, comma-separated, for --brokers.
func (k *KafkaProxy) Brokers() string { return strings.Join(k.seeds, ",") }

// Stall stalls every broker's proxy (Proxy.Stall), those made later too, and returns how
// many connections it silenced.
func (k *KafkaProxy) Stall() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stalled = true
	n := 0
	for _, p := range k.brokers {
		n += p.Stall()
	}
	return n
}

// Resume ends a Stall on every broker's proxy.
func (k *KafkaProxy) Resume() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stalled = false
	for _, p := range k.brokers {
		p.Resume()
	}
}

// proxy returns the proxy of the broker at addr, made on first use.
func (k *KafkaProxy) proxy(addr string) *Proxy {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.brokers[addr]; ok {
		return p
	}
	p := newProxy(k.t, addr, k.frames)
	if k.stalled {
		p.Stall()
	}
	k.brokers[addr] = p
	return p
}

// frames returns one connection's chunkers: whole Kafka frames, the requests' keys and
// versions noted by correlation id so that the responses naming brokers can be rewritten.
func (k *KafkaProxy) frames() (up, down chunker) {
	type sent struct{ key, version int16 }
	var mu sync.Mutex
	pending := map[int32]sent{}
	up = func(src io.Reader) ([]byte, error) {
		f, err := readFrame(src)
		if err == nil && len(f) >= 12 {
			key, version := int16(binary.BigEndian.Uint16(f[4:])), int16(binary.BigEndian.Uint16(f[6:]))
			mu.Lock()
			pending[int32(binary.BigEndian.Uint32(f[8:]))] = sent{key, version}
			mu.Unlock()
		}
		return f, err
	}
	down = func(src io.Reader) ([]byte, error) {
		f, err := readFrame(src)
		if err != nil || len(f) < 8 {
			return f, err
		}
		corr := int32(binary.BigEndian.Uint32(f[4:]))
		mu.Lock()
		req, ok := pending[corr]
		delete(pending, corr)
		mu.Unlock()
		if !ok {
			return f, nil
		}
		return k.rewrite(f, req.key, req.version), nil
	}
	return up, down
}

// readFrame reads one size-prefixed Kafka frame, the size included.
func readFrame(src io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(src, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 256<<20 {
		return nil, errors.New("kafka proxy: frame of " + strconv.FormatUint(uint64(n), 10) + " bytes")
	}
	f := make([]byte, 4+n)
	copy(f, size[:])
	_, err := io.ReadFull(src, f[4:])
	return f, err
}

// rewrite replaces the broker addresses in a response frame of the request key at version
// by their proxies'; frames of other requests, or that do not parse, pass unchanged.
func (k *KafkaProxy) rewrite(f []byte, key, version int16) []byte {
	if key != 3 && key != 10 && key != 60 { // Metadata, FindCoordinator, DescribeCluster
		return f
	}
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	// The response header: size, correlation id, and from the flexible versions on (header
	// v1) tagged fields.
	hdr := 8
	if req.IsFlexible() {
		end, ok := skipTags(f, hdr)
		if !ok {
			return f
		}
		hdr = end
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(f[hdr:]); err != nil {
		return f
	}
	addr := func(host *string, port *int32) {
		p := k.proxy(net.JoinHostPort(*host, strconv.Itoa(int(*port))))
		h, ps, _ := net.SplitHostPort(p.Addr())
		n, _ := strconv.Atoi(ps)
		*host, *port = h, int32(n)
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			addr(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Host != "" {
			addr(&r.Host, &r.Port)
		}
		for i := range r.Coordinators {
			addr(&r.Coordinators[i].Host, &r.Coordinators[i].Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			addr(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	}
	out := append([]byte(nil), f[:hdr]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// skipTags returns the offset past the tagged fields that start at off.
func skipTags(f []byte, off int) (int, bool) {
	n, w := binary.Uvarint(f[off:])
	if w <= 0 {
		return 0, false
	}
	off += w
	for range n {
		if _, w = binary.Uvarint(f[off:]); w <= 0 {
			return 0, false
		}
		off += w
		size, w := binary.Uvarint(f[off:])
		if w <= 0 || off+w+int(size) > len(f) {
			return 0, false
		}
		off += w + int(size)
	}
	return off, true
}
