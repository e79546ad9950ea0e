package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// WALStatuses are the values of pg_replication_slots.wal_status, each a series of
// cdc_relay_slot_wal_status.
var WALStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// Slot holds the replication slot's metrics as PostgreSQL reports them. Update sets them from
// one slotstore.Status; SlotWatcher does that periodically.
type Slot struct {
	lag, retained, safe, active, threshold, above, lastOK prometheus.Gauge
	walStatus                                             *prometheus.GaugeVec
	errors                                                prometheus.Counter

	mu       sync.Mutex
	warn     int64 // retained-WAL threshold in bytes; 0 disables the warning
	isAbove  bool
	hasSafe  bool
	safeDesc *prometheus.Desc
	safeVal  int64
}

// NewSlot registers the slot metrics in reg. warnBytes is the retained-WAL threshold above
// which cdc_relay_slot_retained_wal_above_threshold is 1 (0 disables it).
func NewSlot(reg prometheus.Registerer, warnBytes int64) *Slot {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "slot", Name: name, Help: help})
	}
	s := &Slot{
		lag:       g("lag_bytes", "WAL written since the slot's confirmed_flush_lsn: current WAL - confirmed_flush_lsn."),
		retained:  g("retained_wal_bytes", "WAL the server keeps for the slot: current WAL - restart_lsn."),
		active:    g("active", "1 when some process streams from the slot (pg_replication_slots.active)."),
		threshold: g("retained_wal_threshold_bytes", "The retained-WAL warning threshold (--wal-retained-warn-bytes); 0 when disabled."),
		above:     g("retained_wal_above_threshold", "1 when the slot retains more WAL than the warning threshold."),
		lastOK:    g("status_last_success_timestamp_seconds", "Unix time of the last successful read of pg_replication_slots."),
		walStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "slot", Name: "wal_status",
			Help: "1 for the slot's wal_status: reserved, extended, unreserved (WAL about to be removed) or lost (the slot is invalidated)."}, []string{"status"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "slot", Name: "status_errors_total",
			Help: "Failed reads of the slot's status."}),
		safeDesc: prometheus.NewDesc(Namespace+"_slot_safe_wal_size_bytes",
			"WAL that can still be written before the slot is in danger of losing WAL (pg_replication_slots.safe_wal_size); absent when max_slot_wal_keep_size is unlimited.", nil, nil),
		warn: warnBytes,
	}
	s.threshold.Set(float64(warnBytes))
	reg.MustRegister(s.lag, s.retained, s.active, s.threshold, s.above, s.lastOK, s.walStatus, s.errors, safeCollector{s})
	return s
}

// safeCollector emits safe_wal_size only when the server limits it.
type safeCollector struct{ s *Slot }

func (c safeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.s.safeDesc }
func (c safeCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	has, v := c.s.hasSafe, c.s.safeVal
	c.s.mu.Unlock()
	if has {
		ch <- prometheus.MustNewConstMetric(c.s.safeDesc, prometheus.GaugeValue, float64(v))
	}
}

// Crossing says how an Update moved the slot relative to the threshold.
type Crossing int

const (
	Unchanged Crossing = iota
	WentAbove          // retained WAL rose above the threshold
	WentBelow          // retained WAL fell back to or below it
)

// Update sets the gauges from st and reports whether the retained WAL crossed the threshold.
func (s *Slot) Update(st slotstore.Status) Crossing {
	s.lag.Set(float64(st.LagBytes))
	s.retained.Set(float64(st.RetainedWALBytes))
	s.active.Set(b2f(st.Active))
	for _, w := range WALStatuses {
		s.walStatus.WithLabelValues(w).Set(b2f(w == st.WALStatus))
	}
	s.lastOK.SetToCurrentTime()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hasSafe = st.SafeWALSize != nil
	if s.hasSafe {
		s.safeVal = *st.SafeWALSize
	}
	above := s.warn > 0 && st.RetainedWALBytes > s.warn
	s.above.Set(b2f(above))
	was := s.isAbove
	s.isAbove = above
	switch {
	case above && !was:
		return WentAbove
	case !above && was:
		return WentBelow
	}
	return Unchanged
}

// SlotWatcher reads the slot's status on a normal connection every Interval, updates Slot and
// logs when the retained WAL crosses the threshold or the slot is lost. It owns its
// connection and reconnects on the next tick after a failure.
type SlotWatcher struct {
	ConnString string        // PostgreSQL URL (normal connection). Required.
	Password   string        // replaces ConnString's password when set (--pg-password-file); never logged
	Slot       string        // slot name. Required.
	Interval   time.Duration // default 10s
	Metrics    *Slot         // required
	Logger     *slog.Logger  // default slog.Default()

	conn    *pgx.Conn
	lastWAL string
}

// Run watches until ctx ends and returns nil then. Failures are logged and counted, never
// fatal: the relay's own connection decides whether the slot is usable.
func (w *SlotWatcher) Run(ctx context.Context) error {
	if w.Metrics == nil || w.ConnString == "" || w.Slot == "" {
		return errors.New("metrics: SlotWatcher needs ConnString, Slot and Metrics")
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
	failing := false
	for {
		st, err := w.check(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			w.Metrics.errors.Inc()
			if !failing {
				log.Warn("cannot read the slot's status; slot metrics are stale until it works again", "cause", err)
			}
			failing = true
		default:
			if failing {
				log.Info("slot status readable again")
			}
			failing = false
			w.report(log, st, w.Metrics.Update(st))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (w *SlotWatcher) report(log *slog.Logger, st slotstore.Status, c Crossing) {
	switch c {
	case WentAbove:
		log.Warn("the slot retains more WAL than --wal-retained-warn-bytes: the relay is behind or stopped, and PostgreSQL keeps WAL for it "+
			"(with max_slot_wal_keep_size set, a slot that keeps too much is invalidated and its events are lost; unlimited, the disk fills)",
			"retained_wal_bytes", st.RetainedWALBytes, "threshold_bytes", w.Metrics.warn, "lag_bytes", st.LagBytes,
			"wal_status", st.WALStatus, "safe_wal_size", safeText(st.SafeWALSize))
	case WentBelow:
		log.Info("the slot's retained WAL is back under --wal-retained-warn-bytes",
			"retained_wal_bytes", st.RetainedWALBytes, "threshold_bytes", w.Metrics.warn)
	}
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

func (w *SlotWatcher) check(ctx context.Context) (slotstore.Status, error) {
	if w.conn == nil || w.conn.IsClosed() {
		conn, err := connect(ctx, w.ConnString, w.Password, "cdc-relay-slot-status", w.Interval)
		if err != nil {
			return slotstore.Status{}, err
		}
		w.conn = conn
	}
	qctx, cancel := context.WithTimeout(ctx, w.Interval)
	defer cancel()
	st, err := slotstore.New(w.conn).Status(qctx, w.Slot, "")
	if err != nil && !errors.Is(err, slotstore.ErrSlotMissing) {
		w.close() // a broken connection is re-opened on the next tick
	}
	return st, err
}

func (w *SlotWatcher) close() {
	if w.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		w.conn.Close(ctx)
		cancel()
		w.conn = nil
	}
}
