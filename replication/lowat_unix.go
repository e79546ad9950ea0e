//go:build unix

package replication

import (
	"net"
	"syscall"
)

// setRcvLowat sets the socket's SO_RCVLOWAT: reads do not wake before n bytes are queued
// (or the read deadline passes).
func setRcvLowat(c *net.TCPConn, n int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
