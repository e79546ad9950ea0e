package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// Close sends a final status update with the current flush position, ends the COPY and waits
// (within ctx) for the server to end it too, then closes the connection. Call it after Run
// has returned. It is idempotent.
//
// Ending the COPY is what makes the server apply the final status: the walsender handles the
// client's messages in order, so once it answers the CopyDone it has taken the position. Closing
// the socket right after the status, in the middle of a backlog, resets the connection with
// unread data in it, and the server may never read the status (the next start then replays
// from the previous one).
func (s *Stream) Close(ctx context.Context) error {
	if s.conn == nil {
		return nil
	}
	s.setWakeConn(nil)
	var err error
	if !s.conn.IsClosed() && s.Flushed() != 0 {
		err = s.status(final)
		if err == nil {
			err = s.endCopy(ctx)
		}
	}
	cerr := s.conn.Close(ctx)
	s.conn = nil
	s.state.Store(int32(StateStopped))
	if err != nil {
		return err
	}
	return cerr
}

// endCopy sends CopyDone and reads until the server's ReadyForQuery, discarding the rest of
// the stream, within ctx.
func (s *Stream) endCopy(ctx context.Context) error {
	if s.read.lowat {
		s.read.leaveDrain() // no SO_RCVLOWAT while discarding
	}
	nc := s.conn.Conn()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	} else {
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	}
	defer func() { _ = nc.SetDeadline(time.Time{}) }()
	if _, err := pglogrepl.SendStandbyCopyDone(ctx, s.conn); err != nil {
		return fmt.Errorf("end the replication stream: %w", err)
	}
	return nil
}

func (s *Stream) closeConn() {
	s.setWakeConn(nil)
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.conn.Close(ctx)
		cancel()
		s.conn = nil
	}
}
