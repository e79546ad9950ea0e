package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cdc-relay/cdc-relay/slotstore"
)

// WALStatuses are the values of pg_replication_slots.wal_status, each a series of
// cdc_relay_slot_wal_status.
var WALStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// Slot holds the replication slot's metrics as PostgreSQL reports them: a slotstore.Observer,
// which a slotstore.Watcher updates periodically.
type Slot struct {
	lag, retained, active, threshold, above, lastOK prometheus.Gauge
	walStatus                                       *prometheus.GaugeVec
	errors                                          prometheus.Counter

	warn     int64 // retained-WAL threshold in bytes; 0 disables the warning
	mu       sync.Mutex
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

// Update sets the gauges from st (slotstore.Observer).
func (s *Slot) Update(st slotstore.Status) {
	s.lag.Set(float64(st.LagBytes))
	s.retained.Set(float64(st.RetainedWALBytes))
	s.active.Set(b2f(st.Active))
	for _, w := range WALStatuses {
		s.walStatus.WithLabelValues(w).Set(b2f(w == st.WALStatus))
	}
	s.above.Set(b2f(st.RetainsMoreThan(s.warn)))
	s.lastOK.SetToCurrentTime()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hasSafe = st.SafeWALSize != nil
	if s.hasSafe {
		s.safeVal = *st.SafeWALSize
	}
}

// Failed counts a failed read of the slot's status (slotstore.Observer).
func (s *Slot) Failed() { s.errors.Inc() }
