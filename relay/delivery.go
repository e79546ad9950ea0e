package relay

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
)

// delivery is the delivery guarantee: what the relay asks of it at each step of a record's way,
// and what alone differs between the modes. The pipeline's goroutine calls it in the
// decoder's order; Run calls prepare and finish; the stream's goroutine calls sessionLost; the
// dead-letter goroutine calls held. atLeastOnce (the tracker confirms what Kafka acknowledged)
// and exactlyOnce (a committed Kafka transaction confirms its checkpoint, exactly.go) implement
// it (DESIGN.md, "Exactly-once").
type delivery interface {
	// prepare runs once before the stream starts.
	prepare(ctx context.Context) error
	// ready runs before each message of a session that streams (not a reset) is decoded, and
	// reports whether to decode it: false with a nil error when ctx ended meanwhile.
	ready(ctx context.Context) (bool, error)
	// reset runs at a new replication session's reset, before the pipeline forgets the old
	// session's transactions; an error ends the run.
	reset() error
	// begin starts a transaction that commits at finalLSN (the start of its commit record).
	begin(finalLSN pglogrepl.LSN)
	// record counts the decoder's next record (an event or a bad row) and reports whether to
	// produce it; produced follows each record of a transaction that was produced.
	record() (produce bool, err error)
	produced(ctx context.Context) error
	// committed ends the transaction at endLSN, its records produced.
	committed(ctx context.Context, endLSN pglogrepl.LSN) error
	// idle is rule 3: a keepalive with WAL end walEnd reached the pipeline between transactions.
	idle(walEnd pglogrepl.LSN)
	// due fires when tick has something to do (nil: never); inTxn says whether a transaction is
	// being decoded.
	due() <-chan time.Time
	tick(ctx context.Context, inTxn bool) error
	// caughtUp runs when the pipeline has decoded every message the stream handed over and
	// waits for more.
	caughtUp(ctx context.Context, inTxn bool) error
	// finish ends the delivery once the pipeline stopped (on Run's goroutine), within ctx, and
	// returns the run's error: runErr, or one that explains it.
	finish(ctx context.Context, runErr error) error
	// sessionLost is the stream's OnSessionLost.
	sessionLost(cause error)
	// held reports, before a refused record's dead letter is produced, whether the letter may
	// be: an error ends the run, errStopped leaves it owed.
	held(ctx context.Context, rec *kgo.Record) error
}

// atLeastOnce is the default delivery: every record is produced, and the tracker confirms a
// transaction's end once Kafka acknowledged all of it and everything before it (tracker.go). A
// lost session aborts what the producer buffers and the next session replays it (lost.go).
type atLeastOnce struct{ r *Relay }

func (atLeastOnce) prepare(context.Context) error                  { return nil }
func (atLeastOnce) ready(context.Context) (bool, error)            { return true, nil }
func (atLeastOnce) reset() error                                   { return nil }
func (atLeastOnce) begin(pglogrepl.LSN)                            {}
func (atLeastOnce) record() (bool, error)                          { return true, nil }
func (atLeastOnce) produced(context.Context) error                 { return nil }
func (atLeastOnce) committed(context.Context, pglogrepl.LSN) error { return nil }
func (a atLeastOnce) idle(walEnd pglogrepl.LSN)                    { a.r.track.idle(walEnd) }
func (atLeastOnce) due() <-chan time.Time                          { return nil }
func (atLeastOnce) tick(context.Context, bool) error               { return nil }
func (atLeastOnce) caughtUp(context.Context, bool) error           { return nil }
func (a atLeastOnce) sessionLost(cause error)                      { a.r.abandonSession(cause) }
func (atLeastOnce) held(context.Context, *kgo.Record) error        { return nil }

// finish lets Kafka acknowledge what the producer holds, and parks the dead letters, so that
// the final status confirms it; what is still unacknowledged is replayed by the next start.
func (a atLeastOnce) finish(ctx context.Context, runErr error) error {
	r := a.r
	if err := r.drain(ctx); err != nil {
		r.log.Error("shutdown: records still unacknowledged; they will be published again on restart", "cause", err, "in_flight", r.sink.Buffered())
	}
	return runErr
}
