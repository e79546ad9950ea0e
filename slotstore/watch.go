package slotstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Observer receives what a Watcher reads (metrics.Slot is one).
type Observer interface {
	Update(Status) // a successful read
	Failed()       // a failed one
}

// Watcher reads the slot's status every Interval on a normal connection of its own, hands
// each read to Observer, and logs when the retained WAL crosses WarnBytes and when the slot's
// WAL becomes unreserved or lost. It reconnects on the next tick after a failure.
type Watcher struct {
	Connect   func(context.Context) (*pgx.Conn, error) // opens the watcher's connection. Required.
	Slot      string                                   // required
	Interval  time.Duration                            // default 10s
	WarnBytes int64                                    // the retained-WAL warning threshold; 0 disables it
	Observer  Observer                                 // required
	Logger    *slog.Logger                             // default slog.Default()

	conn    *pgx.Conn
	lastWAL string
	above   bool
}

// Run watches until ctx ends and returns nil then. Failures are logged once per outage and
// counted, never fatal: the relay's own connection decides whether the slot is usable.
func (w *Watcher) Run(ctx context.Context) error {
	if w.Connect == nil || w.Slot == "" || w.Observer == nil {
		return errors.New("slotstore: Watcher needs Connect, Slot and Observer")
	}
	if w.Interval <= 0 {
		w.Interval = 10 * time.Second
	}
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	log := w.Logger.With("slot", w.Slot)
	defer w.close()
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	failing, read := false, false // read: a status was read once
	for {
		st, err := w.check(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			w.Observer.Failed()
			switch {
			case failing:
			case errors.Is(err, ErrSlotMissing):
				// What to do depends on why (dropped, or left on a former primary): the relay
				// itself says so; the metrics watcher only reports.
				log.Warn("the slot does not exist on this server; slot metrics are absent until it does")
			case !read:
				// Nothing to be stale yet: the relay's own connection, which waits or stops,
				// says why PostgreSQL cannot be reached (a wrong password, a missing database).
				log.Debug("cannot read the slot's status yet; slot metrics are absent until it works", "cause", err)
			default:
				log.Warn("cannot read the slot's status; slot metrics are stale until it works again", "cause", err)
			}
			failing = true
		default:
			if failing {
				log.Info("slot status readable again")
			}
			failing, read = false, true
			w.Observer.Update(st)
			w.report(log, st)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (w *Watcher) report(log *slog.Logger, st Status) {
	above := st.RetainsMoreThan(w.WarnBytes)
	switch {
	case above && !w.above:
		log.Warn("the slot retains more WAL than --wal-retained-warn-bytes: the relay is behind or stopped, and PostgreSQL keeps WAL for it "+
			"(with max_slot_wal_keep_size set, a slot that keeps too much is invalidated and its events are lost; unlimited, the disk fills)",
			"retained_wal_bytes", st.RetainedWALBytes, "threshold_bytes", w.WarnBytes, "lag_bytes", st.LagBytes,
			"wal_status", st.WALStatus, "safe_wal_size", safeText(st.SafeWALSize))
	case !above && w.above:
		log.Info("the slot's retained WAL is back under --wal-retained-warn-bytes",
			"retained_wal_bytes", st.RetainedWALBytes, "threshold_bytes", w.WarnBytes)
	}
	w.above = above
	changed := st.WALStatus != w.lastWAL
	w.lastWAL = st.WALStatus
	if changed && (st.WALStatus == "lost" || st.WALStatus == "unreserved") {
		log.Error("the slot's WAL is "+st.WALStatus+": PostgreSQL removed or is about to remove WAL the relay has not read "+
			"(see `cdc-relay slot status`)", "wal_status", st.WALStatus, "retained_wal_bytes", st.RetainedWALBytes)
	}
}

func safeText(v *int64) string {
	if v == nil {
		return "unlimited"
	}
	return fmt.Sprint(*v)
}

func (w *Watcher) check(ctx context.Context) (Status, error) {
	if w.conn == nil || w.conn.IsClosed() {
		cctx, cancel := context.WithTimeout(ctx, w.Interval)
		conn, err := w.Connect(cctx)
		cancel()
		if err != nil {
			return Status{}, err
		}
		w.conn = conn
	}
	qctx, cancel := context.WithTimeout(ctx, w.Interval)
	defer cancel()
	st, err := New(w.conn).Status(qctx, w.Slot, "")
	if err != nil && !errors.Is(err, ErrSlotMissing) {
		w.close() // a broken connection is re-opened on the next tick
	}
	return st, err
}

func (w *Watcher) close() {
	if w.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		w.conn.Close(ctx)
		cancel()
		w.conn = nil
	}
}
