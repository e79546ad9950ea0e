//go:build linux

package replication

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// tcpCounters returns the bytes and segments c has received (TCP_INFO).
func tcpCounters(c *net.TCPConn) (bytes uint64, segs uint32, ok bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	if err := rc.Control(func(fd uintptr) {
		var ti *unix.TCPInfo
		if ti, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			bytes, segs = ti.Bytes_received, ti.Segs_in
		}
	}); err != nil {
		return 0, 0, false
	}
	return bytes, segs, err == nil
}

// nap sleeps for d with microsecond precision (time.Sleep rounds up to about a millisecond
// here, which would cap a paced read far too low).
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// queued returns the bytes waiting in c's receive queue (SIOCINQ).
func queued(c *net.TCPConn) (n int, ok bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	if cerr := rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); cerr != nil {
		return 0, false
	}
	return n, err == nil
}
