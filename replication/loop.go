package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func (s *Stream) stream(ctx context.Context, out chan<- []Message) error {
	var batch []Message
	var batchBytes int
	// timedOut: the last read ended at its deadline or a wake. Caught up, the stream
	// hands the pipeline a transaction whole rather than each message as its segment arrives:
	// pgoutput (proto_version 1) sends a transaction only once it committed, each message with
	// its own send(), so the rest follows within microseconds: one hand-over between goroutines
	// for a one-row transaction instead of three (DESIGN.md, "Reading a backlog"). A read that times out (or is woken) forwards what it holds, so
	// nothing waits past the next status update; MaxBatch and maxBatchBytes bound the rest.
	timedOut := false
	for {
		more := s.read.buffered()
		hold := s.read.open && !timedOut && !s.read.lowat
		if len(batch) > 0 && ((!more && !hold) || len(batch) >= MaxBatch || batchBytes >= maxBatchBytes) {
			if err := s.forward(ctx, out, batch); err != nil {
				return err
			}
			batch, batchBytes = make([]Message, 0, len(batch)), 0
		}
		woke := false
		select {
		case <-s.wakeCh:
			woke = true
		default:
		}
		if err := s.tend(woke); err != nil {
			return err
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
		timedOut = raw == nil
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
					if err := s.status(serverAsked); err != nil {
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
				// pgconn reuses its read buffer: the payload must be copied to cross goroutines,
				// into a buffer of the pool when it is large (payload.go).
				data, pool := s.payloads.get(len(x.WALData))
				copy(data, x.WALData)
				batch = append(batch, Message{Kind: KindData, WALStart: x.WALStart, ServerWALEnd: x.ServerWALEnd, ServerTime: x.ServerTime, Data: data, pool: pool})
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
			if err := s.tend(true); err != nil {
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
			if err := s.tend(false); err != nil {
				return err
			}
		}
	}
}
