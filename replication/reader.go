package replication

import (
	"bufio"
	"context"
	"io"
	"net"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Reading. The stream hands the pipeline everything one read fetched as one batch, so a
// backlog costs one hand-over per read rather than one per message. While it has caught up,
// it reads each message as the walsender sends it: the lowest latency. While it is behind
// (the walsender is sending transactions committed behindLag or more before), it raises the
// socket's SO_RCVLOWAT, so that the kernel wakes it when drainLowat bytes are queued or
// drainWait has passed, instead of at every message; below caughtUpLag it lowers it again.
// DESIGN.md ("Reading a backlog") has the rules, results/ the measurements.
const (
	MaxBatch      = 512                   // messages per batch at most
	idleAfter     = 10 * time.Millisecond // nothing read for this long while draining: drained
	maxBatchBytes = 256 << 10             // message bytes per batch at most (one larger message is its own batch)
	behindLag     = 10 * time.Millisecond
	caughtUpLag   = 2 * time.Millisecond
	drainLowat    = 32 << 10
	drainWait     = time.Millisecond
)

// reader reads the replication connection for the goroutine that owns the stream: it
// switches SO_RCVLOWAT between catching up and draining and bounds each read. Its state
// belongs to that goroutine.
type reader struct {
	conn    *pgconn.PgConn
	tcp     *net.TCPConn  // the connection's socket, for SO_RCVLOWAT; nil when not TCP
	br      *bufio.Reader // the connection's read buffer, under pgproto3's
	lowat   bool          // SO_RCVLOWAT is raised: draining a backlog
	lastMsg time.Time     // when the last message arrived, to notice a drained backlog
	heard   time.Time     // when the server was last heard from: the receive timeout's clock
}

// frontend is the connection's pgconn.Config.BuildFrontend: every connection reads through a
// 64 KiB buffer, so that one read takes what the walsender has sent in one go.
func (r *reader) frontend(rd io.Reader, w io.Writer) *pgproto3.Frontend {
	r.br = bufio.NewReaderSize(rd, 64<<10)
	return pgproto3.NewFrontend(r.br, w)
}

// start takes a new session's connection, caught up.
func (r *reader) start(conn *pgconn.PgConn) {
	r.conn, r.tcp, r.lowat = conn, tcpConn(conn.Conn()), false
}

// buffered reports whether the next message (or part of it) has been read from the socket.
func (r *reader) buffered() bool { return r.conn.Frontend().ReadBufferLen() > 0 || r.br.Buffered() > 0 }

// receive reads the next message, waiting until dl at most and, while draining, drainWait at
// most. A read that times out returns (nil, nil), after leaving the drain mode if nothing
// came for idleAfter.
func (r *reader) receive(ctx context.Context, dl time.Time) (pgproto3.BackendMessage, error) {
	if d := time.Now().Add(drainWait); r.lowat && d.Before(dl) {
		dl = d
	}
	// The per-read context is part of the pace: without it a draining reader is fast enough
	// to keep a walsender on the same host in its per-message mode (DESIGN.md, "Reading a
	// backlog").
	rctx, cancel := context.WithDeadline(ctx, dl)
	msg, err := r.conn.ReceiveMessage(rctx)
	cancel()
	if err == nil {
		r.lastMsg = time.Now()
		r.heard = r.lastMsg
		return msg, nil
	}
	if ctx.Err() != nil || !pgconn.Timeout(err) {
		return nil, err
	}
	// Nothing arrived for a while and nothing waits in the socket: the backlog is drained.
	// Leave the drain mode now rather than at the next Begin with little lag, which a quiet
	// outbox never sends (a 1 ms read bound forever is what kept an idle relay busy). The
	// socket's queue is what tells.
	if r.lowat && time.Since(r.lastMsg) >= idleAfter && r.socketEmpty() {
		r.leaveDrain()
	}
	return nil, nil
}

// woken clears the read deadline a wake moved into the past.
func (r *reader) woken() error { return r.conn.Conn().SetReadDeadline(time.Time{}) }

// xlogData adapts the read mode to an XLogData message: a Begin sent behindLag or more after
// its commit starts a drain, one sent within caughtUpLag ends it. The lag is on the server's
// clock alone.
func (r *reader) xlogData(x pglogrepl.XLogData) {
	if len(x.WALData) == 0 || pglogrepl.MessageType(x.WALData[0]) != pglogrepl.MessageTypeBegin {
		return
	}
	var b pglogrepl.BeginMessage
	if b.Decode(x.WALData[1:]) == nil {
		r.adapt(x.ServerTime.Sub(b.CommitTime))
	}
}

// adapt raises SO_RCVLOWAT when the walsender sends transactions lag after their commit
// and lowers it when the stream has caught up.
func (r *reader) adapt(lag time.Duration) {
	switch {
	case r.tcp == nil:
	case !r.lowat && lag >= behindLag:
		r.lowat = setRcvLowat(r.tcp, drainLowat) == nil
	case r.lowat && lag <= caughtUpLag:
		r.leaveDrain()
	}
}

// socketEmpty reports whether nothing waits to be read: neither in the read buffers nor in the
// socket's receive queue (where the queue cannot be read, time alone decides).
func (r *reader) socketEmpty() bool {
	if r.buffered() {
		return false
	}
	n, ok := queued(r.tcp)
	return !ok || n == 0
}

// leaveDrain reads each message as it comes again: SO_RCVLOWAT back to 1.
func (r *reader) leaveDrain() {
	if r.tcp != nil && setRcvLowat(r.tcp, 1) == nil {
		r.lowat = false
	}
}

func tcpConn(c net.Conn) *net.TCPConn {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = t.NetConn()
	}
	tc, _ := c.(*net.TCPConn)
	return tc
}
