package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// errStopReached ends the pipeline once the stream passed Config.StopAt and everything before
// it is delivered and confirmed: Run turns it into a clean stop (Reached reports it).
var errStopReached = errors.New("relay: reached the stop LSN")

// pastStop reports whether a message shows the stream passed Config.StopAt: a transaction whose
// commit record starts at or after it (commitLSN, a Begin's FinalLSN), a non-transactional
// message at or after it, or an idle keepalive whose WAL end is at or after it (the server has
// decoded, and sent, every record before that end). A slot streams a transaction by the start
// of its commit record (PostgreSQL's SnapBuildXactNeedsSkip): the same test a slot created, or
// advanced, at StopAt applies, so the two generations of a reshard split the transactions
// without a gap or an overlap.
func (r *Relay) pastStop(lsn pglogrepl.LSN) bool {
	return r.cfg.StopAt != 0 && lsn >= r.cfg.StopAt
}

// stopDrainPoll is how often reachStop looks at the tracker while Kafka acknowledges the last
// records before the stop.
const stopDrainPoll = 20 * time.Millisecond

// reachStop runs on the pipeline's goroutine when the stream passed Config.StopAt, with no
// transaction open: nothing at or after StopAt was produced. It waits for Kafka to acknowledge
// every record produced (and the dead letters to be parked), commits the open Kafka transaction
// in exactly-once mode, confirms StopAt to the slot, and returns errStopReached. Its error is
// another one when that cannot be done (a failed record, a stop signal): the run then ends as it
// would have without the stop, confirmed no further than what was delivered.
func (r *Relay) reachStop(ctx context.Context, seen pglogrepl.LSN) error {
	r.log.Info("the stream passed --stop-at-lsn: publishing nothing more, waiting for Kafka to acknowledge what came before",
		"stop_at_lsn", r.cfg.StopAt, "seen", seen)
	for r.track.inFlight() > 0 {
		if err := r.sink.Flush(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("relay: before the stop LSN %s: %w", r.cfg.StopAt, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.track.failCh:
			return r.track.err()
		case <-time.After(stopDrainPoll):
		}
	}
	if err := r.delivery.caughtUp(ctx, false); err != nil { // exactly-once: commits the open Kafka transaction
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	r.delivery.idle(r.cfg.StopAt)
	if got := r.stream.Flushed(); got < r.cfg.StopAt {
		return fmt.Errorf("relay: everything before the stop LSN %s is delivered, but the position could not be confirmed past %s; run the same command again", r.cfg.StopAt, got)
	}
	r.reached.Store(true)
	return errStopReached
}

// Reached reports whether Run ended because the stream passed Config.StopAt, everything before
// it delivered and confirmed.
func (r *Relay) Reached() bool { return r.reached.Load() }
