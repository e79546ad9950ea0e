//go:build !linux

package replication

import (
	"net"
	"time"
)

// tcpCounters is not available here: the stream reads without pacing.
func tcpCounters(*net.TCPConn) (uint64, uint32, bool) { return 0, 0, false }

func nap(d time.Duration) { time.Sleep(d) }

// queued is not available here: a drained backlog is judged by time alone.
func queued(*net.TCPConn) (int, bool) { return 0, false }
