package replication

import (
	"net"

	"golang.org/x/sys/unix"
)

// queued returns the bytes waiting in c's receive queue (SIOCINQ); ok is false when c is nil
// (the connection is not TCP: a Unix socket, or the simulation's in-memory pipe).
func queued(c *net.TCPConn) (n int, ok bool) {
	if c == nil {
		return 0, false
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	if cerr := rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); cerr != nil {
		return 0, false
	}
	return n, err == nil
}
