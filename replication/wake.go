package replication

import (
	"net"
	"time"
)

// wake makes the read loop send a status update now: it interrupts a blocked read by moving
// the socket's read deadline into the past, then signals. The loop resets the deadline after
// it took the signal (tend), so the order (deadline, then signal) leaves no deadline in the
// past. It touches the socket only once the session streams (setWakeConn): during the
// handshake a deadline in the past failed its queries.
func (s *Stream) wake() {
	s.wakeMu.Lock()
	if s.wakeConn != nil {
		_ = s.wakeConn.SetReadDeadline(time.Unix(1, 0))
	}
	s.wakeMu.Unlock()
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

func (s *Stream) setWakeConn(c net.Conn) {
	s.wakeMu.Lock()
	s.wakeConn = c
	s.wakeMu.Unlock()
}
