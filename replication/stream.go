package replication

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

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
	// Data is one pgoutput message, owned by the receiver. Its buffer may be the stream's
	// (TakeLease): the receiver gives it back once nothing reads Data any more, or never.
	Data []byte
	pool *payloadPool // Data's buffer is the pool's; nil: it is Data's own
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
	payloads   payloadPool // the XLogData payloads' buffers (payload.go)
	timeline   int32       // the server's timeline when the first session started (IDENTIFY_SYSTEM)
	nowTL      int32       // the timeline of the current session's server
	system     atomic.Pointer[System]

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
	s.read.onDrain = cfg.OnDrain
	return s, nil
}

// System is a server's IDENTIFY_SYSTEM answer: its cluster and timeline.
type System struct {
	ID       string
	Timeline int32
}

// System returns the current (or last) session's server, the zero System before the first
// session identified it. Exactly-once mode writes it into each checkpoint: an LSN means
// something only on the cluster that wrote it.
func (s *Stream) System() System {
	if sys := s.system.Load(); sys != nil {
		return *sys
	}
	return System{}
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
		case errors.Is(err, slotfacts.ErrSlotActive):
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
