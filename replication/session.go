package replication

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

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
	s.system.Store(&System{ID: sys.SystemID, Timeline: sys.Timeline})
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

type connectError struct {
	host string
	port uint16
	err  error
}

func (e *connectError) Error() string {
	return fmt.Sprintf("connect to PostgreSQL at %s:%d: %v (check that the server runs, that the URL's host, port, user and database are right, and that pg_hba.conf allows a replication connection for this user)", e.host, e.port, e.err)
}
func (e *connectError) Unwrap() error { return e.err }
