//go:build !linux

package replication

import "net"

// queued is not available here: a drained backlog is judged by time alone.
func queued(*net.TCPConn) (int, bool) { return 0, false }
