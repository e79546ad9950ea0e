package replication

import (
	"context"
	"io"
	"net"
	"sync"
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
// A drain of large messages (a mean of largeMsg bytes or more) reads in larger pieces: up to
// readSizeLarge bytes a read, woken at drainLowatLarge. DESIGN.md ("Reading a backlog") has
// the rules, results/ the measurements.
const (
	MaxBatch        = 512                   // messages per batch at most
	idleAfter       = 10 * time.Millisecond // nothing read for this long while draining: drained
	maxBatchBytes   = 256 << 10             // message bytes per batch at most (one larger message is its own batch)
	behindLag       = 10 * time.Millisecond
	caughtUpLag     = 2 * time.Millisecond
	drainLowat      = 32 << 10
	drainWait       = time.Millisecond
	readSize        = 64 << 10  // bytes a read takes at most
	readSizeLarge   = 256 << 10 // while draining large messages
	drainLowatLarge = 128 << 10
	largeMsg        = 1 << 10 // mean message bytes from which a drain reads in large pieces
	smallMsg        = 512     // and below which it reads in readSize pieces again
)

// reader reads the replication connection for the goroutine that owns the stream: it
// switches SO_RCVLOWAT between catching up and draining and bounds each read. Its state
// belongs to that goroutine.
type reader struct {
	conn    *pgconn.PgConn
	tcp     *net.TCPConn // the connection's socket, for SO_RCVLOWAT; nil when not TCP
	br      *readBuffer  // the connection's read buffer, under pgproto3's
	lowat   bool         // SO_RCVLOWAT is raised: draining a backlog
	open    bool         // the last XLogData read was inside a transaction: after its Begin, before its Commit
	large   bool         // draining large messages: SO_RCVLOWAT drainLowatLarge, reads of readSizeLarge
	meanMsg int          // the XLogData payloads' moving mean size, bytes
	lastMsg time.Time    // when the last message arrived, to notice a drained backlog
	heard   time.Time    // when the server was last heard from: the receive timeout's clock
	bound   readBound    // bounds a caught-up read without a context of its own
	onDrain func(bool)   // Config.OnDrain: told when lowat changes; nil for none
}

// frontend is the connection's pgconn.Config.BuildFrontend: every connection streams through a
// buffer of its own, so that one read takes what the walsender has sent in one go (readSize,
// readSizeLarge while draining large messages). The handshake reads as pgproto3 asks, and the
// buffer is made at the stream's first read (streaming): a connection that never streams (a
// standby asking every StandbyRetry for a slot another process holds, a retry while the server
// is down) allocates none of it.
func (r *reader) frontend(rd io.Reader, w io.Writer) *pgproto3.Frontend {
	r.br = &readBuffer{rd: rd, max: readSize, unbuffered: true}
	return pgproto3.NewFrontend(r.br, w)
}

// streaming is called once START_REPLICATION is answered: reads are buffered from now on.
func (r *reader) streaming() { r.br.unbuffered = false }

// start takes a new session's connection, caught up. Nothing the previous session armed
// touches the new connection: its handshake must not see a read deadline in the past.
func (r *reader) start(conn *pgconn.PgConn) {
	r.bound.detach()
	r.conn, r.tcp, r.large, r.open = conn, tcpConn(conn.Conn()), false, false
	r.setLowat(false) // the session may have ended while draining
}

// setLowat records whether the reader drains (SO_RCVLOWAT raised) and tells onDrain when
// that changed.
func (r *reader) setLowat(v bool) {
	if v == r.lowat {
		return
	}
	r.lowat = v
	if r.onDrain != nil {
		r.onDrain(v)
	}
}

// buffered reports whether the next message (or part of it) has been read from the socket.
func (r *reader) buffered() bool { return r.conn.Frontend().ReadBufferLen() > 0 || r.br.Buffered() > 0 }

// receive reads the next message, waiting until dl at most and, while draining, drainWait at
// most. A read that times out returns (nil, nil), after leaving the drain mode if nothing
// came for idleAfter.
func (r *reader) receive(ctx context.Context, dl time.Time) (pgproto3.BackendMessage, error) {
	var msg pgproto3.BackendMessage
	var err error
	if r.lowat {
		// The per-read context is part of the pace: without it a draining reader is fast enough
		// to keep a walsender on the same host in its per-message mode (DESIGN.md, "Reading a
		// backlog").
		if d := time.Now().Add(drainWait); d.Before(dl) {
			dl = d
		}
		rctx, cancel := context.WithDeadline(ctx, dl)
		msg, err = r.conn.ReceiveMessage(rctx)
		cancel()
	} else {
		// Caught up, a read is bounded by the session's own timer and ctx's end, armed once,
		// not by a context made, watched and canceled per message (DESIGN.md, "Reading a
		// backlog": that was a sixth of the relay's CPU at 2,000 rows/s).
		if !r.bound.arm(ctx, r.conn.Conn(), dl) {
			return nil, ctx.Err() // nil: dl has passed, as a read that timed out
		}
		msg, err = r.conn.ReceiveMessage(context.Background())
		r.bound.done()
	}
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
// clock alone. It also notes whether a transaction is open (Begin read, Commit not yet).
func (r *reader) xlogData(x pglogrepl.XLogData) {
	r.meanMsg += (len(x.WALData) - r.meanMsg) / 8
	if len(x.WALData) == 0 {
		return
	}
	switch pglogrepl.MessageType(x.WALData[0]) {
	case pglogrepl.MessageTypeCommit:
		r.open = false
		return
	case pglogrepl.MessageTypeBegin:
		r.open = true
	default:
		return
	}
	var b pglogrepl.BeginMessage
	if b.Decode(x.WALData[1:]) == nil {
		r.adapt(x.ServerTime.Sub(b.CommitTime))
	}
}

// adapt raises SO_RCVLOWAT when the walsender sends transactions lag after their commit
// and lowers it when the stream has caught up; while draining, it follows the messages' size.
func (r *reader) adapt(lag time.Duration) {
	switch {
	case r.tcp == nil:
	case r.lowat && lag <= caughtUpLag:
		r.leaveDrain()
	case r.lowat || lag >= behindLag:
		large := r.meanMsg >= largeMsg || r.large && r.meanMsg >= smallMsg
		if r.lowat && large == r.large {
			return
		}
		lowat, size := drainLowat, readSize
		if large {
			lowat, size = drainLowatLarge, readSizeLarge
		}
		if setRcvLowat(r.tcp, lowat) == nil {
			r.large, r.br.max = large, size
			r.setLowat(true)
		}
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
		r.large, r.br.max = false, readSize
		r.setLowat(false)
	}
}

// readBuffer is bufio.Reader's Read and Buffered with a read size that can change: a read from
// the socket takes max bytes at most.
type readBuffer struct {
	rd   io.Reader
	buf  []byte // made (or grown) to max when a read needs it
	r, w int    // buf[r:w] is read from rd and not yet returned
	max  int    // bytes a read from rd takes at most
	// unbuffered: the session's handshake, every read goes to p directly (reader.streaming).
	unbuffered bool
}

// Read returns bytes already read, or reads once from rd: into p directly when p can take a
// whole read, as bufio.Reader does, or while unbuffered.
func (b *readBuffer) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.r == b.w {
		if len(p) >= b.max || b.unbuffered {
			return b.rd.Read(p)
		}
		if len(b.buf) < b.max {
			b.buf = make([]byte, b.max)
		}
		n, err := b.rd.Read(b.buf[:b.max])
		b.r, b.w = 0, n
		if n == 0 {
			return 0, err
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	return n, nil
}

// Buffered returns the number of bytes read from rd and not yet returned.
func (b *readBuffer) Buffered() int { return b.w - b.r }

func tcpConn(c net.Conn) *net.TCPConn {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = t.NetConn()
	}
	tc, _ := c.(*net.TCPConn)
	return tc
}

// readBound ends a caught-up read at its deadline, or when the stream's context ends, the way a
// wake does (Stream.wake): by moving the socket's read deadline into the past. One timer and
// one context.AfterFunc serve every read of a session, and a read whose deadline is the one
// already armed (the next status update, which moves a few times a second) costs two lock
// operations. It touches the socket only while a read is in progress: never during a
// handshake, nor after the stream's last read (Close's own deadlines), and it never sets a
// deadline ahead, so the past deadline of a wake that came just before a read still ends it.
// Its fields are guarded by mu: the timer and the AfterFunc run on goroutines of their own.
type readBound struct {
	mu      sync.Mutex
	nc      net.Conn  // the streaming session's connection; nil between sessions
	at      time.Time // when the timer fires
	timer   *time.Timer
	ctx     context.Context
	reading bool // a read on nc is in progress (between arm and done)
	tripped bool // the bound moved nc's read deadline into the past during this read
}

// arm starts a read on nc that must end at dl at the latest, and when ctx ends. It reports
// false, and the read must not start, if one of them has come already.
func (b *readBound) arm(ctx context.Context, nc net.Conn, dl time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx != ctx {
		b.ctx = ctx
		context.AfterFunc(ctx, b.trip) // never stopped: outside a read it does nothing
	}
	if !dl.Equal(b.at) {
		b.at = dl
		if b.timer == nil {
			b.timer = time.AfterFunc(time.Until(dl), b.trip)
		} else {
			b.timer.Reset(time.Until(dl))
		}
	}
	if ctx.Err() != nil || !time.Now().Before(dl) {
		return false
	}
	b.nc, b.reading = nc, true
	return true
}

// trip ends the read in progress.
func (b *readBound) trip() {
	b.mu.Lock()
	if b.reading {
		_ = b.nc.SetReadDeadline(time.Unix(1, 0))
		b.tripped = true
		b.at = time.Time{} // the next arm starts the timer again, even for the same deadline
	}
	b.mu.Unlock()
}

// done ends the read, clearing the past deadline the bound left (a wake's is cleared by
// Stream.woken). A connection that cannot take a deadline is broken: the next read says so.
func (b *readBound) done() {
	b.mu.Lock()
	b.reading = false
	if b.tripped {
		b.tripped = false
		_ = b.nc.SetReadDeadline(time.Time{})
	}
	b.mu.Unlock()
}

// detach stops the timer and forgets the connection, between sessions.
func (b *readBound) detach() {
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.nc, b.at, b.reading, b.tripped = nil, time.Time{}, false, false
	b.mu.Unlock()
}
