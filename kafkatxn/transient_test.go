package kafkatxn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// What the relay waits out at start (a broker restarting, a leader being elected, a coordinator
// loading its log) and what ends the run at once (a fence, a missing or uncompacted topic, a
// refusal of the credentials, a bad checkpoint, a stop).
func TestTransientTellsWhatPassesByItself(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("txn: list t partition 0: %w", kerr.LeaderNotAvailable), true},
		{fmt.Errorf("txn: list t partition 0: %w", kerr.NotLeaderForPartition), true},
		{fmt.Errorf("txn: take transactional id x: %w", kerr.CoordinatorLoadInProgress), true},
		{kerr.CoordinatorNotAvailable, true},
		{kerr.RequestTimedOut, true},
		{fmt.Errorf("unable to dial: %w", refused), true},
		{io.EOF, true},
		{fmt.Errorf("txn: read t: %w", context.DeadlineExceeded), true},

		{nil, false},
		{&FencedError{TransactionalID: "x", Err: kerr.ProducerFenced}, false},
		{fmt.Errorf("txn: take transactional id x: %w", kerr.ProducerFenced), false},
		{&TopicMissingError{Topic: "t"}, false},
		{fmt.Errorf("wrapped: %w", &NotCompactedError{Topic: "t", Policy: "delete"}), false},
		{fmt.Errorf("txn: list t partition 0: %w", kerr.TopicAuthorizationFailed), false},
		{kerr.TransactionalIDAuthorizationFailed, false},
		{kerr.SaslAuthenticationFailed, false},
		{kgo.ErrClientClosed, false},
		{context.Canceled, false},
		{errors.New("txn: the checkpoint of slot s at t partition 0 offset 3: version 2 is newer than this relay's 1"), false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
