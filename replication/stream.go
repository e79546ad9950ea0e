package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/cdc-relay/cdc-relay/internal/retry"
	"github.com/cdc-relay/cdc-relay/internal/slotfacts"
)

// Kind says what a Message carries.
type Kind uint8

const (
	// KindData is an XLogData message: Data holds one pgoutput message.
	KindData Kind = iota + 1
	// KindKeepalive is a primary keepalive: ServerWALEnd is the position up to which the
	// server has decoded and sent everything. When nothing is in flight, it is safe to Ack.
	KindKeepalive
	// KindReset starts a new session: forget any open transaction and the relation cache;
	// the server replays from the slot's confirmed position.
	KindReset
)

// Message is one item of the stream, in server order. Run hands them over in batches (a
// []Message in server order, owned by the receiver): whatever arrived in one read, so that
// a backlog costs one hand-over per read rather than one per message.
type Message struct {
	Kind         Kind
	WALStart     pglogrepl.LSN
	ServerWALEnd pglogrepl.LSN
	ServerTime   time.Time
	// Data is one pgoutput message, owned by the receiver.
	Data []byte
}

// State is what the Stream is doing, for health checks and metrics.
type State int32

// The states, in the order a Stream goes through them.
const (
	StateConnecting State = iota
	StateStreaming
	StateStandby
	StateReconnecting
	StateStopped
)

func (s State) String() string {
	switch s {
	case StateConnecting:
		return "connecting"
	case StateStreaming:
		return "streaming"
	case StateStandby:
		return "standby"
	case StateReconnecting:
		return "reconnecting"
	case StateStopped:
		return "stopped"
	}
	return "unknown"
}

// Stream is a resumable logical replication stream. The connection belongs to the
// goroutine in Run, and after Run returns, to the caller of Close.
type Stream struct {
	cfg     Config
	connCfg *pgconn.Config
	log     *slog.Logger

	flushed    atomic.Uint64 // the position to confirm: only ever raised, by Ack or the slot
	state      atomic.Int32
	waiting    atomic.Bool // forward waits for the consumer to take a batch
	reconnects atomic.Int64
	read       reader
	timeline   int32 // the server's timeline when the first session started (IDENTIFY_SYSTEM)
	nowTL      int32 // the timeline of the current session's server

	conn       *pgconn.PgConn
	nextStatus time.Time
	sent       pglogrepl.LSN // the flush position of the last status update sent

	// The replay window: Ack schedules a status update ConfirmDelay later (coalesced), so a
	// kill -9 replays what was confirmed in the last ConfirmDelay rather than StatusInterval.
	// wake interrupts a blocked read by setting the socket's read deadline in the past, then
	// signals wakeCh; the read loop and forward send the status.
	wakeMu      sync.Mutex
	wakeConn    net.Conn // the session's connection, nil between sessions
	wakePending atomic.Bool
	wakeCh      chan struct{}
}

// New validates cfg and copies its connection configuration. It does not connect.
func New(cfg Config) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cc := cfg.Conn.Config.Copy()
	cc.RuntimeParams["replication"] = "database"
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "cdc-relay"
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = 10 * time.Second
	}
	s := &Stream{cfg: cfg, connCfg: cc, log: cfg.Logger.With("slot", cfg.Slot), wakeCh: make(chan struct{}, 1)}
	cc.BuildFrontend = s.read.frontend
	return s, nil
}

// Ack raises the flush position reported to the server to lsn. Lower positions are
// ignored. The caller promises that every transaction committed before lsn is delivered.
func (s *Stream) Ack(lsn pglogrepl.LSN) {
	for {
		cur := s.flushed.Load()
		if uint64(lsn) <= cur {
			return
		}
		if s.flushed.CompareAndSwap(cur, uint64(lsn)) {
			break
		}
	}
	if s.cfg.ConfirmDelay > 0 && s.wakePending.CompareAndSwap(false, true) {
		time.AfterFunc(s.cfg.ConfirmDelay, s.wake)
	}
}

// wake makes the read loop send a status update now: it interrupts a blocked read by moving
// the socket's read deadline into the past, then signals. The loop resets the deadline after
// it took the signal, so the order (deadline, then signal) leaves no deadline in the past.
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

// woken handles a wake: it clears the past deadline wake left and sends the confirmed
// position if it moved since the last status update.
func (s *Stream) woken() error {
	s.wakePending.Store(false)
	if err := s.read.woken(); err != nil {
		return classify(fmt.Errorf("receive: %w", err), s.cfg.Slot)
	}
	if s.Flushed() != s.sent {
		return s.sendStatus()
	}
	return nil
}

func (s *Stream) setWakeConn(c net.Conn) {
	s.wakeMu.Lock()
	s.wakeConn = c
	s.wakeMu.Unlock()
}

// Flushed returns the flush position that is (or will next be) reported to the server.
func (s *Stream) Flushed() pglogrepl.LSN { return pglogrepl.LSN(s.flushed.Load()) }

// State returns what the Stream is doing now.
func (s *Stream) State() State { return State(s.state.Load()) }

// Waiting reports whether the stream waits for the consumer to take a batch (the pipeline is
// slow or paused). While it waits it does not read, and a silent server is noticed only if the
// socket's receive queue is empty (DESIGN.md, "A silent server ends the session").
func (s *Stream) Waiting() bool { return s.waiting.Load() }

// Reconnects counts sessions started after the first.
func (s *Stream) Reconnects() int64 { return s.reconnects.Load() }

// Run streams until ctx ends (it then returns nil and leaves the connection open for
// Close) or a non-retryable error. Messages go to out in server order, in batches; sending
// blocks, and status updates keep flowing while it does.
func (s *Stream) Run(ctx context.Context, out chan<- []Message) error {
	everStreamed := false
	attempt := 0
	for session := 0; ; session++ {
		if session > 0 {
			select {
			case out <- []Message{{Kind: KindReset}}:
			case <-ctx.Done():
				return nil
			}
		}
		streamed, err := s.session(ctx, out)
		everStreamed = everStreamed || streamed
		if ctx.Err() != nil {
			return nil
		}
		if streamed && s.cfg.OnSessionLost != nil {
			s.cfg.OnSessionLost(err)
		}
		s.closeConn()
		var wait time.Duration
		switch {
		case errors.Is(err, ErrSlotActive):
			s.state.Store(int32(StateStandby))
			s.log.Info("slot is held by another process: waiting as a standby", "retry_in", s.cfg.StandbyRetry, "cause", err)
			wait = s.cfg.StandbyRetry
			attempt = 0
		case !IsRetryable(err):
			s.state.Store(int32(StateStopped))
			return err
		default:
			// Whatever retrying can fix is retried, before the first session as after it: a
			// relay (re)started during an outage, or a standby that never streamed, waits for
			// PostgreSQL instead of exiting (exactly when a takeover is likely).
			if streamed {
				attempt = 0
			}
			wait = retry.Backoff{Min: s.cfg.MinBackoff, Max: s.cfg.MaxBackoff, Jitter: true}.Delay(attempt)
			attempt++
			s.state.Store(int32(StateReconnecting))
			if everStreamed || streamed {
				s.reconnects.Add(1)
				s.log.Warn("replication connection lost: reconnecting", "in", wait.Round(time.Millisecond), "flushed", s.Flushed(), "cause", err)
			} else {
				s.log.Warn("waiting for PostgreSQL: cannot start replicating; retrying", "in", wait.Round(time.Millisecond), "cause", err)
			}
		}
		if !retry.Sleep(ctx, wait) {
			return nil
		}
	}
}

// session connects, starts streaming, and forwards until an error or ctx ends. It reports
// whether streaming had started.
func (s *Stream) session(ctx context.Context, out chan<- []Message) (bool, error) {
	s.state.Store(int32(StateConnecting))
	cctx, cancel := context.WithTimeout(ctx, s.connCfg.ConnectTimeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(cctx, s.connCfg)
	if err != nil {
		return false, &connectError{host: s.connCfg.Host, port: s.connCfg.Port, err: err}
	}
	s.conn = conn
	s.read.start(conn)
	if err := checkServerVersion(conn.ParameterStatus("server_version")); err != nil {
		return false, err
	}
	// The timeline tells a promoted standby from the server the relay started on: a slot
	// missing there was not dropped but left behind on the old primary.
	sys, err := pglogrepl.IdentifySystem(cctx, conn)
	if err != nil {
		return false, classify(fmt.Errorf("identify system: %w", err), s.cfg.Slot)
	}
	s.nowTL = sys.Timeline
	if s.timeline == 0 {
		s.timeline = sys.Timeline
	}
	start, err := s.checkSlot(cctx)
	if err != nil {
		return false, err
	}
	err = pglogrepl.StartReplication(cctx, conn, s.cfg.Slot, start, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names '" + strings.Join(s.cfg.Publications, ",") + "'",
			"messages 'true'",
		},
	})
	if err != nil {
		return false, classify(fmt.Errorf("start replication: %w", err), s.cfg.Slot)
	}
	// A wake may interrupt reads only from now on: its read deadline in the past would fail
	// the handshake's queries (a wake that came earlier waits in wakeCh for the stream loop).
	s.setWakeConn(conn.Conn())
	s.state.Store(int32(StateStreaming))
	s.log.Info("streaming", "from", start, "publications", s.cfg.Publications)
	s.nextStatus = time.Time{}
	s.read.heard = time.Now()
	return true, s.stream(ctx, out)
}

// checkSlot reads the slot over the replication connection (replication=database accepts
// simple queries), refuses a missing, lost or foreign slot, and returns where to start: the
// slot's own confirmed position, even when this process already confirmed more (DESIGN.md,
// "Every session starts from the slot's own confirmed_flush_lsn").
func (s *Stream) checkSlot(ctx context.Context) (pglogrepl.LSN, error) {
	slot, found, err := slotfacts.Lookup(ctx, s.conn, s.cfg.Slot)
	if err != nil {
		return 0, err
	}
	if !found || !slot.SameDatabase {
		if f := s.Flushed(); f != 0 && s.nowTL != s.timeline {
			return 0, fmt.Errorf("%w: slot %q is not on this server, which is on timeline %d while the relay started on timeline %d: "+
				"a standby was promoted and the slot stayed on the old primary (before PostgreSQL 17 no logical slot moves to a "+
				"standby; on 17+ a slot made with `cdc-relay slot create --failover` does, on a standby with slot sync). "+
				"The relay had confirmed %s there. To recover without loss (docs/failover.md): "+
				"1. run `cdc-relay cutover --slot %s --publication ... --table ...` against the new primary: it creates the slot "+
				"and publishes every pending outbox row committed before it, the rows the relay had not confirmed among them "+
				"(duplicates, never loss); 2. then start `cdc-relay run` again (never before cutover finished)",
				ErrSlotMissing, s.cfg.Slot, s.nowTL, s.timeline, f, s.cfg.Slot)
		}
		if f := s.Flushed(); f != 0 {
			return 0, fmt.Errorf("%w: slot %q was dropped while this relay used it (it had confirmed %s): re-create it with "+
				"`cdc-relay slot create --slot %s --publication ...`; rows committed after %s are not in a new slot: "+
				"republish them from the outbox table (e.g. with cdc-relay poll)", ErrSlotMissing, s.cfg.Slot, f, s.cfg.Slot, f)
		}
		return 0, fmt.Errorf("%w: slot %q in this database (create it with `cdc-relay slot create --slot %s --publication ...`)",
			ErrSlotMissing, s.cfg.Slot, s.cfg.Slot)
	}
	if slot.Plugin != "pgoutput" {
		return 0, fmt.Errorf("%w: slot %q uses %q", ErrWrongPlugin, s.cfg.Slot, slot.Plugin)
	}
	if slot.WALStatus == "lost" {
		return 0, slotLostError(s.cfg.Slot, "its wal_status is lost: it held back more WAL than max_slot_wal_keep_size allows, and PostgreSQL removed WAL it still needed", errors.New("wal_status is lost"))
	}
	if slot.PID != 0 && uint32(slot.PID) != s.conn.PID() {
		return 0, fmt.Errorf("%w: slot %q is active for PID %d", ErrSlotActive, s.cfg.Slot, slot.PID)
	}
	if !slot.HasConfirmed {
		return 0, fmt.Errorf("read slot %q: it has no confirmed_flush_lsn", s.cfg.Slot)
	}
	lsn := slot.Confirmed
	// Start from the slot's own position, never from a higher one this process remembers: after
	// a failover the new primary's slot may be behind it, and starting ahead would skip what lies
	// between. Replay is allowed, loss is not. Reporting exactly the slot's position is also safe
	// on servers that take a reported flush position without checking that it moves forward.
	if f := s.Flushed(); f > lsn {
		s.log.Warn("the slot is behind what this relay confirmed: replaying from the slot's position (duplicates, no loss)",
			"slot_confirmed", lsn, "relay_confirmed", f)
	}
	s.flushed.Store(uint64(lsn))
	s.sent = lsn
	return lsn, nil
}

func (s *Stream) stream(ctx context.Context, out chan<- []Message) error {
	var batch []Message
	var batchBytes int
	for {
		more := s.read.buffered()
		if len(batch) > 0 && (!more || len(batch) >= MaxBatch || batchBytes >= maxBatchBytes) {
			if err := s.forward(ctx, out, batch); err != nil {
				return err
			}
			batch, batchBytes = make([]Message, 0, len(batch)), 0
		}
		select {
		case <-s.wakeCh:
			if err := s.woken(); err != nil {
				return err
			}
		default:
		}
		if !time.Now().Before(s.nextStatus) {
			if err := s.heartbeat(); err != nil {
				return err
			}
		}
		// Each read waits until the next status update is due at most, and no longer than the
		// receive timeout allows.
		raw, err := s.read.receive(ctx, s.readDeadline())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return classify(fmt.Errorf("receive: %w", err), s.cfg.Slot)
		}
		switch msg := raw.(type) {
		case nil: // the read timed out
			if err := s.checkSilence(); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			return classify(pgconn.ErrorResponseToPgError(msg), s.cfg.Slot)
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				k, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("parse keepalive: %w", err)
				}
				if k.ReplyRequested {
					if err := s.sendStatus(); err != nil {
						return err
					}
				}
				batch = append(batch, Message{Kind: KindKeepalive, ServerWALEnd: k.ServerWALEnd, ServerTime: k.ServerTime})
			case pglogrepl.XLogDataByteID:
				x, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("parse XLogData: %w", err)
				}
				s.read.xlogData(x)
				// pgconn reuses its read buffer: the payload must be copied to cross goroutines.
				data := make([]byte, len(x.WALData))
				copy(data, x.WALData)
				batch = append(batch, Message{Kind: KindData, WALStart: x.WALStart, ServerWALEnd: x.ServerWALEnd, ServerTime: x.ServerTime, Data: data})
				batchBytes += len(data)
			}
		}
	}
}

// forward hands a batch to the consumer, sending status updates while it waits so the
// server does not time the connection out while Kafka is slow.
func (s *Stream) forward(ctx context.Context, out chan<- []Message, batch []Message) error {
	defer s.waiting.Store(false)
	for {
		select {
		case out <- batch:
			return nil
		default:
		}
		s.waiting.Store(true)
		t := time.NewTimer(time.Until(s.readDeadline()))
		select {
		case out <- batch:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-s.wakeCh:
			t.Stop()
			if err := s.woken(); err != nil {
				return err
			}
		case <-t.C:
			// Not reading while the pipeline is slow, the stream cannot see the server's
			// messages, only the socket's queue: anything in it counts as heard (a queue that
			// fills up may be a backlog the server cannot send more of); only one that stays
			// empty through the heartbeats' replies for ReceiveTimeout is a silent server.
			if n, ok := queued(s.read.tcp); !ok || n > 0 || s.read.buffered() {
				s.read.heard = time.Now()
			}
			if err := s.checkSilence(); err != nil {
				return err
			}
			if !time.Now().Before(s.nextStatus) {
				if err := s.heartbeat(); err != nil {
					return err
				}
			}
		}
	}
}

// readDeadline is when the next read must end at the latest: the next status update, or the
// moment the server has been silent for ReceiveTimeout.
func (s *Stream) readDeadline() time.Time {
	if s.cfg.ReceiveTimeout > 0 {
		if d := s.read.heard.Add(s.cfg.ReceiveTimeout); d.Before(s.nextStatus) {
			return d
		}
	}
	return s.nextStatus
}

// checkSilence ends the session when nothing arrived from the server for ReceiveTimeout
// (DESIGN.md, "A silent server ends the session").
func (s *Stream) checkSilence() error {
	if s.cfg.ReceiveTimeout <= 0 {
		return nil
	}
	if quiet := time.Since(s.read.heard); quiet >= s.cfg.ReceiveTimeout {
		return &silentError{quiet: quiet, timeout: s.cfg.ReceiveTimeout}
	}
	return nil
}

// heartbeatEvery is the heartbeat's period: StatusInterval, or ReceiveTimeout/2 if that is
// shorter, so that a quiet server is asked to reply twice within the receive timeout.
func (s *Stream) heartbeatEvery() time.Duration {
	if t := s.cfg.ReceiveTimeout / 2; t > 0 && t < s.cfg.StatusInterval {
		return t
	}
	return s.cfg.StatusInterval
}

// heartbeat sends the periodic status update, asking the server to reply: a healthy server
// answers at once, so only a silent one lets ReceiveTimeout pass without a message.
func (s *Stream) heartbeat() error { return s.sendStatusReply(true) }

// sendStatus reports the flush position explicitly in all three fields. Reporting the
// write position no further than the flush position also makes an idle walsender send a
// keepalive with its current position, which is how a quiet slot learns it may advance.
func (s *Stream) sendStatus() error { return s.sendStatusReply(false) }

func (s *Stream) sendStatusReply(reply bool) error {
	pos := s.Flushed()
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos,
		WALFlushPosition: pos,
		WALApplyPosition: pos,
		ClientTime:       time.Now(),
		ReplyRequested:   reply,
	})
	s.nextStatus = time.Now().Add(s.heartbeatEvery())
	if err != nil {
		return fmt.Errorf("send standby status: %w", err)
	}
	s.sent = pos
	return nil
}

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
		err = s.sendStatus()
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

type connectError struct {
	host string
	port uint16
	err  error
}

func (e *connectError) Error() string {
	return fmt.Sprintf("connect to PostgreSQL at %s:%d: %v (check that the server runs, that the URL's host, port, user and database are right, and that pg_hba.conf allows a replication connection for this user)", e.host, e.port, e.err)
}
func (e *connectError) Unwrap() error { return e.err }
