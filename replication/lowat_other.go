//go:build !unix

package replication

import (
	"errors"
	"net"
)

// setRcvLowat is not available here: the stream reads without it, one wakeup per read.
func setRcvLowat(*net.TCPConn, int) error { return errors.ErrUnsupported }
