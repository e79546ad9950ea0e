package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

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

// why says why a standby status update goes out.
type why uint8

const (
	// confirmedMoved: a wake (ConfirmDelay after Ack moved the position) found the confirmed
	// position past the last update's.
	confirmedMoved why = iota + 1
	// serverAsked: a keepalive asked for a reply (its ReplyRequested).
	serverAsked
	// heartbeatDue: heartbeatEvery passed since the last update. The heartbeat asks the server to
	// reply: a healthy server answers at once, so only a silent one lets ReceiveTimeout pass
	// without a message (DESIGN.md, "A silent server ends the session").
	heartbeatDue
	// final: Close, before it ends the COPY.
	final
)

// tend sends the status update that is due between reads, at most one: after a wake (woke),
// the confirmed position if it moved since the last update; when the heartbeat is due, the
// heartbeat. The read loop calls it before each read, forward whenever its wait ends without a
// hand-over, so the status keeps flowing while the pipeline is slow.
func (s *Stream) tend(woke bool) error {
	if woke {
		// The wake moved the read deadline into the past: clear it before anything reads.
		s.wakePending.Store(false)
		if err := s.read.woken(); err != nil {
			return classify(fmt.Errorf("receive: %w", err), s.cfg.Slot)
		}
		if s.Flushed() != s.sent {
			return s.status(confirmedMoved)
		}
	}
	if !time.Now().Before(s.nextStatus) {
		return s.status(heartbeatDue)
	}
	return nil
}

// status sends a standby status update for w: the one place that does. It reports the flush
// position explicitly in all three fields (DESIGN.md, "Standby status reports write = flush =
// apply"). Reporting the write position no further than the flush position also makes an idle
// walsender send a keepalive with its current position, which is how a quiet slot learns it
// may advance. Only the heartbeat asks the server to reply. Every update, whatever its reason,
// puts the next heartbeat heartbeatEvery later.
func (s *Stream) status(w why) error {
	pos := s.Flushed()
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos,
		WALFlushPosition: pos,
		WALApplyPosition: pos,
		ClientTime:       time.Now(),
		ReplyRequested:   w == heartbeatDue,
	})
	s.nextStatus = time.Now().Add(s.heartbeatEvery())
	if err != nil {
		return fmt.Errorf("send standby status: %w", err)
	}
	s.sent = pos
	return nil
}
