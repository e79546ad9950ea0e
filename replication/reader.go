package replication

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync/atomic"
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

// Pace says when a backlog is read at a paced rate (pace.go).
type Pace uint8

const (
	// PaceSameHost paces a drain from PostgreSQL on this host, where the walsender pays for
	// the relay's side of TCP too. The default.
	PaceSameHost Pace = iota
	// PaceOff never paces.
	PaceOff
	// PaceAlways paces every drain over TCP, whatever the host.
	PaceAlways
)

// reader reads the replication connection for the goroutine that owns the stream: it
// switches SO_RCVLOWAT between catching up and draining, paces a drain where Pace says so,
// and bounds each read. Its state belongs to that goroutine; paced is read by any.
type reader struct {
	pace  Pace
	paced atomic.Int64 // bytes read at a paced rate

	conn     *pgconn.PgConn
	tcp      *net.TCPConn  // the connection's socket, for SO_RCVLOWAT; nil when not TCP
	br       *bufio.Reader // the connection's read buffer, under pgproto3's
	lowat    bool          // SO_RCVLOWAT is raised: draining a backlog
	paceable bool          // Pace allows this connection and its TCP counters are readable
	deadline bool          // paced reads have set a read deadline on the socket
	timedOut bool          // the last paced read timed out (or a wake moved the deadline)
	lastMsg  time.Time     // when the last message arrived, to notice a drained backlog
}

// pacing reports whether reads are paced now.
func (r *reader) pacing() bool { return r.paceable && r.lowat }

// frontend is the connection's pgconn.Config.BuildFrontend: every connection reads through a
// pacer (idle unless pacing) and a 64 KiB buffer, so that a paced read takes what the
// walsender has sent in one go.
func (r *reader) frontend(rd io.Reader, w io.Writer) *pgproto3.Frontend {
	pr := &pacedReader{r: rd, pacing: r.pacing, total: &r.paced}
	pr.p.counters = func() (uint64, uint32, bool) { return tcpCounters(r.tcp) }
	r.br = bufio.NewReaderSize(pr, 64<<10)
	return pgproto3.NewFrontend(r.br, w)
}

// start takes a new session's connection, caught up and unpaced.
func (r *reader) start(conn *pgconn.PgConn) {
	r.conn, r.tcp, r.lowat, r.paceable, r.deadline, r.timedOut = conn, tcpConn(conn.Conn()), false, false, false, false
	if r.tcp != nil && (r.pace == PaceAlways || r.pace == PaceSameHost && sameHost(r.tcp)) {
		_, _, r.paceable = tcpCounters(r.tcp)
	}
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
	var msg pgproto3.BackendMessage
	var err error
	if r.pacing() {
		// The pacer sets the pace, so the read needs no context of its own: the socket's
		// deadline bounds it, and ctx is checked here.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !r.buffered() || r.timedOut || !r.deadline { // a read may block: bound it
			if err := r.tcp.SetReadDeadline(dl); err != nil {
				return nil, err
			}
			r.deadline = true
		}
		msg, err = r.conn.ReceiveMessage(context.Background())
		r.timedOut = err != nil && pgconn.Timeout(err)
	} else {
		// Not paced, the per-read context is part of the pace: without it a draining reader
		// is fast enough to keep the walsender in its per-message mode (DESIGN.md, "Reading
		// a backlog").
		rctx, cancel := context.WithDeadline(ctx, dl)
		msg, err = r.conn.ReceiveMessage(rctx)
		cancel()
	}
	if err == nil {
		r.lastMsg = time.Now()
		return msg, nil
	}
	if ctx.Err() != nil || !pgconn.Timeout(err) {
		return nil, err
	}
	// Nothing arrived for a while and nothing waits in the socket: the backlog is drained.
	// Leave the drain mode now rather than at the next Begin with little lag, which a quiet
	// outbox never sends (a 1 ms read bound forever is what kept an idle relay busy). The
	// socket's queue is what tells: a paced read that napped past its deadline times out with
	// data waiting, and leaving then would stop the pacing.
	if r.lowat && time.Since(r.lastMsg) >= idleAfter && r.socketEmpty() {
		r.leaveDrain()
	}
	return nil, nil
}

// woken clears the read deadline a wake moved into the past.
func (r *reader) woken() error {
	r.deadline, r.timedOut = false, true // a paced read sets its own deadline again
	return r.conn.Conn().SetReadDeadline(time.Time{})
}

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

// leaveDrain reads each message as it comes again: SO_RCVLOWAT back to 1, no paced deadline.
func (r *reader) leaveDrain() {
	if r.tcp == nil || setRcvLowat(r.tcp, 1) != nil {
		return
	}
	r.lowat = false
	if r.deadline {
		r.tcp.SetReadDeadline(time.Time{}) // left by paced reads; pgconn's contexts take over
		r.deadline = false
	}
}

func tcpConn(c net.Conn) *net.TCPConn {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = t.NetConn()
	}
	tc, _ := c.(*net.TCPConn)
	return tc
}
