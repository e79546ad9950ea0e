package simwal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Change is one change inside a transaction: an Insert into Rel (Values, nil = NULL) or, when
// Rel is nil, a transactional logical message with Prefix and Content.
type Change struct {
	Rel     *Relation
	Values  []Value
	Prefix  string
	Content string
}

// Txn is a committed transaction of the fake WAL.
type Txn struct {
	Xid        uint32
	BeginLSN   pglogrepl.LSN   // where its first change is
	ChangeLSNs []pglogrepl.LSN // one per change
	CommitLSN  pglogrepl.LSN   // the commit record's start (Begin.FinalLSN)
	EndLSN     pglogrepl.LSN   // the commit record's end (Commit.TransactionEndLSN)
	CommitTime time.Time
	Changes    []Change
}

// Status is one standby status update the server received.
type Status struct {
	Session             int
	Write, Flush, Apply pglogrepl.LSN
	ReplyRequested      bool
	At                  time.Time
}

// SessionInfo describes one START_REPLICATION the server accepted.
type SessionInfo struct {
	Session   int
	Requested pglogrepl.LSN // the LSN the client asked for
	Slot      pglogrepl.LSN // the slot's confirmed_flush_lsn when it asked
	Start     pglogrepl.LSN // where decoding starts: max(Requested, Slot)
	At        time.Time
	// End is how the session ended, "" while it runs: EndCopyDone (the client ended the COPY
	// and the server answered), EndTerminate (a Terminate message in the COPY), EndEOF (the
	// client closed or reset the socket without either), EndServer (the server closed it: a
	// Drop, DropAll or Close) or EndUnstarted (the connection was gone before the server could
	// answer START_REPLICATION: nothing was streamed).
	End string
}

// How a session ended (SessionInfo.End).
const (
	EndCopyDone  = "copydone"
	EndTerminate = "terminate"
	EndEOF       = "eof"
	EndServer    = "server"
	EndUnstarted = "unstarted"
)

// Event is where a session is about to send its next message.
type Event struct {
	Session int // 1 for the first session
	Sent    int // XLogData messages this session has sent so far
}

// Action is what the script wants done at an Event.
type Action struct {
	Drop      bool // close the connection instead of sending
	Keepalive bool // send a keepalive (WAL end = sent position) first
	Reply     bool // with reply requested
	// Pause, when set, makes the session flush what it sent and wait this long before it
	// sends (a walsender slow to decode, in the middle of a large transaction if the Event
	// falls there); the client's end of the session ends the wait.
	Pause time.Duration
}

// Server is the fake walsender. Its zero value is not usable: call New.
type Server struct {
	ln   net.Listener
	slot string
	dial func(ctx context.Context, network, addr string) (net.Conn, error) // NewOn's; nil: TCP
	// Script, when set, is consulted before each XLogData message. It runs on a session's
	// goroutine, must not block (Action.Pause waits), and must be set before the first connection.
	Script func(Event) Action
	// OnFlush, when set, runs on a session's reader goroutine for each status update whose
	// flush position is not zero, before the slot takes it. Set it before the first connection.
	OnFlush func(Status)
	// ServerVersion is the server_version parameter sessions report ("15.8" from New). Set it
	// before the first connection.
	ServerVersion string
	// HandshakeDelay, when set, delays each answer of a session's setup (IDENTIFY_SYSTEM, the
	// slot query, START_REPLICATION). Set it before the first connection.
	HandshakeDelay time.Duration

	ccOnce sync.Once
	cc     *pgx.ConnConfig // ConnConfig's, parsed once

	mu        sync.Mutex
	wal       []Txn
	walEnd    pglogrepl.LSN // the server's WAL insert position
	xid       uint32
	confirmed pglogrepl.LSN // the slot's confirmed_flush_lsn
	activePID uint32        // the walsender streaming from the slot, 0 when none
	holder    uint32        // another process holding the slot (HoldSlot)
	nextPID   uint32
	sessions  []SessionInfo
	statuses  []Status
	live      map[*session]struct{}
	closed    bool
	down      bool // SetDown: every new connection is closed at once
	refused   int  // connections closed so while down
	wg        sync.WaitGroup
}

// New starts a server for slot on 127.0.0.1 whose slot is confirmed at start.
func New(slot string, start pglogrepl.LSN) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return newServer(ln, nil, slot, start), nil
}

func newServer(ln net.Listener, dial func(ctx context.Context, network, addr string) (net.Conn, error), slot string, start pglogrepl.LSN) *Server {
	s := &Server{ln: ln, dial: dial, slot: slot, ServerVersion: "15.8", walEnd: start, confirmed: start, nextPID: 1000, xid: 700, live: map[*session]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

// ConnConfig is the parsed connection configuration of the server (no TLS): a copy of one parsed
// once (pgx.ParseConfig was a hundredth of a virtual-time schedule, called for every run).
func (s *Server) ConnConfig() *pgx.ConnConfig {
	s.ccOnce.Do(func() {
		s.cc, _ = pgx.ParseConfig("postgres://sim@" + s.ln.Addr().String() + "/sim?sslmode=disable") // cannot fail
		if s.dial != nil {
			s.cc.DialFunc = s.dial
			s.cc.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
		}
	})
	return s.cc.Copy()
}

// Close stops the server and every session, and waits for their goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for ss := range s.live {
		ss.conn.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// Commit appends a transaction with changes to the WAL, after gap bytes of other WAL, and
// wakes the sessions. It returns the transaction with its positions.
func (s *Server) Commit(gap int, changes []Change) Txn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.xid++
	lsn := s.walEnd + pglogrepl.LSN(gap) + 0x18
	t := Txn{Xid: s.xid, BeginLSN: lsn, CommitTime: time.Now(), Changes: changes}
	for _, c := range changes {
		t.ChangeLSNs = append(t.ChangeLSNs, lsn)
		n := 0x40 + len(c.Content)
		for _, v := range c.Values {
			if v != nil {
				n += len(*v) + 5
			}
		}
		lsn += pglogrepl.LSN((n + 7) &^ 7)
	}
	t.CommitLSN = lsn
	t.EndLSN = lsn + 0x38
	s.walEnd = t.EndLSN
	s.wal = append(s.wal, t)
	s.wakeLocked()
	return t
}

// AdvanceWAL adds n bytes of WAL that the publication does not cover (other tables).
func (s *Server) AdvanceWAL(n int) {
	s.mu.Lock()
	s.walEnd += pglogrepl.LSN(n)
	s.wakeLocked()
	s.mu.Unlock()
}

// WAL returns the committed transactions, oldest first.
func (s *Server) WAL() []Txn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Txn(nil), s.wal...)
}

// WALEnd returns the server's WAL insert position.
func (s *Server) WALEnd() pglogrepl.LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.walEnd
}

// Confirmed returns the slot's confirmed_flush_lsn.
func (s *Server) Confirmed() pglogrepl.LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// Statuses returns every standby status update received, in order.
func (s *Server) Statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Status(nil), s.statuses...)
}

// Sessions returns every replication session started, in order.
func (s *Server) Sessions() []SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SessionInfo(nil), s.sessions...)
}

// HoldSlot makes the slot active for another process (pid != 0) or releases it (pid 0).
func (s *Server) HoldSlot(pid uint32) {
	s.mu.Lock()
	s.holder = pid
	s.mu.Unlock()
}

// RewindSlot sets the slot's confirmed_flush_lsn back to lsn, as a promoted standby's copy of
// the slot may be behind what the old primary's had confirmed.
func (s *Server) RewindSlot(lsn pglogrepl.LSN) {
	s.mu.Lock()
	s.confirmed = lsn
	s.mu.Unlock()
}

// SetDown makes the server unreachable (down) or reachable again: while down, every new
// connection is closed as soon as it is accepted, as a server that is restarting or whose
// host is gone would end it, and DropAll is done at once. Sessions counts none of them.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
	if down {
		s.DropAll()
	}
}

// Refused returns how many connections were closed at once while the server was down.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Silence makes the network between the server and its live replication sessions go silent
// with the sockets open: they send nothing and take no status update (packets lost both
// ways), and each holds the slot for hold, its walsender's wal_sender_timeout, before the
// server ends it. New connections are served as usual. It returns how many sessions it muted.
func (s *Server) Silence(hold time.Duration) (muted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss := range s.live {
		if ss.id > 0 && !ss.muted && ss.readErr == nil {
			ss.muted, ss.muteEnd = true, time.Now().Add(hold)
			muted++
		}
	}
	s.wakeLocked()
	return muted
}

// DropAll closes every live session's connection, as a server restart would.
func (s *Server) DropAll() {
	s.mu.Lock()
	for ss := range s.live {
		ss.conn.Close()
	}
	s.mu.Unlock()
}

func (s *Server) wakeLocked() {
	for ss := range s.live {
		ss.wake()
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		if s.down {
			s.refused++
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.nextPID++
		ss := &session{srv: s, conn: c, pid: s.nextPID, notify: make(chan struct{}, 1)}
		s.live[ss] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			ss.serve()
			c.Close()
			s.mu.Lock()
			delete(s.live, ss)
			if s.activePID == ss.pid {
				s.activePID = 0
			}
			s.mu.Unlock()
		}()
	}
}

// session is one client connection.
type session struct {
	srv    *Server
	conn   net.Conn
	be     *pgproto3.Backend
	pid    uint32
	id     int // replication session number, from 1; 0 before START_REPLICATION
	notify chan struct{}

	// Guarded by srv.mu: what the reader learnt.
	lastWrite  pglogrepl.LSN
	pingWait   bool // a keepalive was sent and no status update came since
	replyAsked bool // the client asked for a reply (ReplyRequested)
	readErr    error
	copyDone   bool // the client ended the COPY: answer as the walsender does
	// Silence: until muteEnd the session sends nothing and takes no status update (the
	// network dropped every packet both ways), then the server closes it, as a walsender's
	// wal_sender_timeout does; the slot stays active for it until then.
	muted   bool
	muteEnd time.Time
}

// endLocked records how the replication session ended, once. Call it with srv.mu held.
func (ss *session) endLocked(end string) {
	if ss.id > 0 && ss.srv.sessions[ss.id-1].End == "" {
		ss.srv.sessions[ss.id-1].End = end
	}
}

func (ss *session) wake() {
	select {
	case ss.notify <- struct{}{}:
	default:
	}
}

func (ss *session) send(m pgproto3.BackendMessage) { ss.be.Send(m) }

// silent reports whether Silence muted the session; if so it first waits, sending nothing,
// until the mute ends (or the server closes), as a walsender that hears nothing waits for its
// wal_sender_timeout, whatever the client does meanwhile.
func (ss *session) silent() bool {
	s := ss.srv
	s.mu.Lock()
	muted, end := ss.muted, ss.muteEnd
	s.mu.Unlock()
	if !muted {
		return false
	}
	for {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed || !time.Now().Before(end) {
			return true
		}
		time.Sleep(min(time.Until(end), 10*time.Millisecond))
	}
}

func (ss *session) serve() {
	ss.be = pgproto3.NewBackend(ss.conn, ss.conn)
	if err := ss.startup(); err != nil {
		return
	}
	for {
		m, err := ss.be.Receive()
		if err != nil {
			return
		}
		switch q := m.(type) {
		case *pgproto3.Terminate:
			return
		case *pgproto3.Query:
			time.Sleep(ss.srv.HandshakeDelay)
			switch {
			case strings.HasPrefix(q.String, "IDENTIFY_SYSTEM"):
				if ss.identifySystem() != nil {
					return
				}
			case strings.HasPrefix(q.String, "SELECT slot_type"): // slotfacts.Lookup
				if ss.slotQuery() != nil {
					return
				}
			case strings.HasPrefix(q.String, "START_REPLICATION"):
				ss.replicate(q.String)
				return
			default:
				ss.send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: pgerrcode.SyntaxError, Message: "simwal: unexpected query " + q.String})
				ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
				if ss.be.Flush() != nil {
					return
				}
			}
		default:
			return
		}
	}
}

func (ss *session) startup() error {
	for {
		m, err := ss.be.ReceiveStartupMessage()
		if err != nil {
			return err
		}
		switch m.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			if _, err := ss.conn.Write([]byte{'N'}); err != nil {
				return err
			}
			continue
		case *pgproto3.StartupMessage:
		default:
			return errors.New("simwal: unexpected startup message")
		}
		ss.send(&pgproto3.AuthenticationOk{})
		for k, v := range map[string]string{"server_version": ss.srv.ServerVersion, "client_encoding": "UTF8", "standard_conforming_strings": "on", "DateStyle": "ISO, MDY"} {
			ss.send(&pgproto3.ParameterStatus{Name: k, Value: v})
		}
		ss.send(&pgproto3.BackendKeyData{ProcessID: ss.pid, SecretKey: []byte{1, 2, 3, 4}})
		ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		return ss.be.Flush()
	}
}

// identifySystem answers IDENTIFY_SYSTEM: one system on timeline 1.
func (ss *session) identifySystem() error {
	txt := func(name string) pgproto3.FieldDescription {
		return pgproto3.FieldDescription{Name: []byte(name), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}
	}
	ss.send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{txt("systemid"), txt("timeline"), txt("xlogpos"), txt("dbname")}})
	ss.send(&pgproto3.DataRow{Values: [][]byte{[]byte("7000000000000000001"), []byte("1"), []byte("0/1000000"), []byte("sim")}})
	ss.send(&pgproto3.CommandComplete{CommandTag: []byte("IDENTIFY_SYSTEM")})
	ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return ss.be.Flush()
}

// slotQuery answers replication.Stream's read of pg_replication_slots (slotfacts.Lookup): a
// logical pgoutput slot of the connection's database.
func (ss *session) slotQuery() error {
	s := ss.srv
	s.mu.Lock()
	pid := s.activePID
	if s.holder != 0 {
		pid = s.holder
	}
	confirmed := s.confirmed
	s.mu.Unlock()
	txt := func(name string) pgproto3.FieldDescription {
		return pgproto3.FieldDescription{Name: []byte(name), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}
	}
	active := "f"
	if pid != 0 {
		active = "t"
	}
	ss.send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{txt("slot_type"), txt("coalesce"), txt("coalesce"),
		txt("coalesce"), txt("active"), txt("coalesce"), txt("coalesce"), txt("coalesce"), txt("coalesce")}})
	ss.send(&pgproto3.DataRow{Values: [][]byte{[]byte("logical"), []byte("pgoutput"), []byte("sim"), []byte("t"), []byte(active),
		fmt.Appendf(nil, "%d", pid), []byte(confirmed.String()), []byte("reserved"), []byte("f")}})
	ss.send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
	ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return ss.be.Flush()
}

// replicate serves START_REPLICATION SLOT <slot> LOGICAL <lsn> (...).
func (ss *session) replicate(q string) {
	s := ss.srv
	f := strings.Fields(q)
	if len(f) < 5 || f[2] != s.slot {
		ss.send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: pgerrcode.UndefinedObject, Message: fmt.Sprintf("replication slot %q does not exist", f[2])})
		ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		_ = ss.be.Flush()
		return
	}
	requested, err := pglogrepl.ParseLSN(f[4])
	if err != nil {
		return
	}
	s.mu.Lock()
	if other := max(s.activePID, s.holder); other != 0 {
		s.mu.Unlock()
		ss.send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: pgerrcode.ObjectInUse, Message: fmt.Sprintf("replication slot %q is active for PID %d", s.slot, other)})
		ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		_ = ss.be.Flush()
		return
	}
	s.activePID = ss.pid
	ss.id = len(s.sessions) + 1
	start := max(requested, s.confirmed)
	s.sessions = append(s.sessions, SessionInfo{Session: ss.id, Requested: requested, Slot: s.confirmed, Start: start, At: time.Now()})
	s.mu.Unlock()

	ss.send(&pgproto3.CopyBothResponse{})
	if ss.be.Flush() != nil {
		s.mu.Lock()
		ss.endLocked(EndUnstarted)
		s.mu.Unlock()
		return
	}
	done := make(chan struct{})
	go func() { // the reader: standby status updates
		defer close(done)
		ss.read()
	}()
	ss.stream(start, done)
	s.mu.Lock()
	if ss.muted {
		// The walsender timed out and let go of the slot, but the network is still silent: the
		// client never sees the connection close, only its own timeout ends it.
		ss.endLocked(EndServer)
		if s.activePID == ss.pid {
			s.activePID = 0
		}
		s.mu.Unlock()
		<-done
		ss.conn.Close()
		return
	}
	copyDone := ss.copyDone
	if ss.readErr == nil { // a Drop, or the server closing: the client did not end it
		ss.endLocked(EndServer)
	}
	s.mu.Unlock()
	if copyDone { // the walsender's answer: its own CopyDone, then the command's end
		ss.send(&pgproto3.CopyDone{})
		ss.send(&pgproto3.CommandComplete{CommandTag: []byte("START_REPLICATION")})
		ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		_ = ss.be.Flush()
	}
	ss.conn.Close()
	<-done
}

func (ss *session) read() {
	s := ss.srv
	for {
		m, err := ss.be.Receive()
		s.mu.Lock()
		muted := ss.muted
		s.mu.Unlock()
		if muted { // nothing the client sends arrives: not its status, CopyDone or close
			if err != nil {
				return // the session ends when the mute does (stream), as EndServer
			}
			continue
		}
		if err != nil {
			s.mu.Lock()
			ss.readErr = err
			end := EndEOF
			// The server closed the connection itself (io.ErrClosedPipe: an in-memory one, NewOn).
			if errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
				end = EndServer
			}
			ss.endLocked(end)
			s.mu.Unlock()
			ss.wake()
			return
		}
		switch m := m.(type) {
		case *pgproto3.CopyData:
			if len(m.Data) != 34 || m.Data[0] != 'r' {
				continue
			}
			st := Status{
				Session:        ss.id,
				Write:          pglogrepl.LSN(binary.BigEndian.Uint64(m.Data[1:])),
				Flush:          pglogrepl.LSN(binary.BigEndian.Uint64(m.Data[9:])),
				Apply:          pglogrepl.LSN(binary.BigEndian.Uint64(m.Data[17:])),
				ReplyRequested: m.Data[33] != 0,
				At:             time.Now(),
			}
			if st.Flush != 0 && s.OnFlush != nil {
				s.OnFlush(st)
			}
			s.mu.Lock()
			s.statuses = append(s.statuses, st)
			if st.Flush != 0 {
				// PostgreSQL 15 takes the reported flush position as the slot's
				// confirmed_flush_lsn without checking that it moves forward.
				s.confirmed = st.Flush
			}
			ss.lastWrite = st.Write
			ss.pingWait = false
			ss.replyAsked = ss.replyAsked || st.ReplyRequested
			s.mu.Unlock()
			ss.wake()
		case *pgproto3.CopyDone, *pgproto3.Terminate:
			s.mu.Lock()
			ss.readErr = errors.New("client ended the copy")
			_, ss.copyDone = m.(*pgproto3.CopyDone)
			if ss.copyDone {
				ss.endLocked(EndCopyDone)
			} else {
				ss.endLocked(EndTerminate)
			}
			s.mu.Unlock()
			ss.wake()
			return
		}
	}
}

// idleWake is how long a caught-up session waits for a commit or a status update before it
// looks again whether to send a keepalive. Everything it waits for wakes it (Commit, AdvanceWAL,
// a status update, the reader's end, Silence, Close), so this is only a fallback: at 200 ms it was
// a tenth of the CPU of a virtual-time schedule that lasts hours.
const idleWake = 10 * time.Second

// stream sends the WAL from start: every transaction whose commit record starts at or after
// start (PostgreSQL skips the others), then keepalives when the client's write position is
// behind the sent position, as an idle walsender does.
func (ss *session) stream(start pglogrepl.LSN, done <-chan struct{}) {
	s := ss.srv
	sent := 0
	sentPtr := start
	next := 0 // index into s.wal of the next transaction to consider
	rels := map[uint32]bool{}
	// Caught up, the walsender looks again after idleWake at the latest: one timer for the
	// session, not one per wait (on virtual time each is a runtime timer made and dropped).
	idle := time.NewTimer(idleWake)
	defer idle.Stop()
	xlog := func(lsn pglogrepl.LSN, payload []byte) bool {
		if ss.silent() {
			return false
		}
		var act Action
		if s.Script != nil {
			act = s.Script(Event{Session: ss.id, Sent: sent})
		}
		if act.Drop {
			_ = ss.be.Flush()
			return false
		}
		if act.Pause > 0 {
			if ss.be.Flush() != nil {
				return false
			}
			pause := time.NewTimer(act.Pause)
			select {
			case <-pause.C:
			case <-done:
				pause.Stop()
				return false
			}
		}
		if act.Keepalive {
			ss.send(&pgproto3.CopyData{Data: Keepalive(sentPtr, time.Now(), act.Reply)})
		}
		ss.send(&pgproto3.CopyData{Data: XLogData(lsn, s.WALEnd(), time.Now(), payload)})
		sent++
		return true
	}
	for {
		if ss.silent() {
			return
		}
		s.mu.Lock()
		stop := ss.readErr != nil || s.closed
		var t *Txn
		for next < len(s.wal) && t == nil {
			if s.wal[next].CommitLSN >= start {
				t = &s.wal[next]
			}
			next++
		}
		var walEnd pglogrepl.LSN
		var ping, reply bool
		if t == nil {
			walEnd = s.walEnd
			ping = ss.lastWrite < walEnd && !ss.pingWait
			reply = ss.replyAsked
			if ping || reply {
				ss.pingWait, ss.replyAsked = true, false
			}
		}
		s.mu.Unlock()
		if stop {
			return
		}
		if t != nil {
			if !xlog(t.BeginLSN, BeginMsg(t.CommitLSN, t.CommitTime, t.Xid)) {
				return
			}
			for i, c := range t.Changes {
				var payload []byte
				if c.Rel == nil {
					payload = LogicalMsg(true, t.ChangeLSNs[i], c.Prefix, c.Content)
				} else {
					if !rels[c.Rel.ID] {
						if !xlog(t.ChangeLSNs[i], RelationMsg(c.Rel)) {
							return
						}
						rels[c.Rel.ID] = true
					}
					payload = InsertMsg(c.Rel.ID, c.Values)
				}
				if !xlog(t.ChangeLSNs[i], payload) {
					return
				}
			}
			if !xlog(t.CommitLSN, CommitMsg(t.CommitLSN, t.EndLSN, t.CommitTime)) {
				return
			}
			sentPtr = t.EndLSN
			if ss.be.Flush() != nil {
				return
			}
			continue
		}
		// Caught up: everything up to the WAL end is decoded.
		sentPtr = max(sentPtr, walEnd)
		if ping || reply {
			ss.send(&pgproto3.CopyData{Data: Keepalive(sentPtr, time.Now(), false)})
			if ss.be.Flush() != nil {
				return
			}
		}
		idle.Reset(idleWake)
		select {
		case <-ss.notify:
		case <-done:
			ss.silent() // a muted session holds the slot until the mute ends
			return
		case <-idle.C:
		}
	}
}
