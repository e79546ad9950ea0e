package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PollerSnapshot is what the polling publisher reports when Prometheus scrapes.
type PollerSnapshot struct {
	Published    int64 // rows acknowledged on their own topic and marked published
	DeadLettered int64 // rows acknowledged on the dead-letter topic and marked published
	BadRows      int64 // rows that could not become records
	Cycles       int64 // cycles that selected rows
	RolledBack   int64 // cycles rolled back (Kafka or PostgreSQL unavailable)
}

// PollerSource returns the poller's counters; called once per scrape from the HTTP goroutine.
type PollerSource func() PollerSnapshot

// Poller holds the metrics of `cdc-relay poll`. Names are shared with Relay where the meaning
// is the same, so one dashboard serves both modes. Counters are read from a PollerSource at
// scrape time; Published, ProduceError and SetPending are hooks for what only exists at event
// time. Its methods are safe for concurrent use and no-ops on a nil *Poller.
type Poller struct {
	bytes              prometheus.Counter
	latency            prometheus.Histogram
	errors             [numClasses]prometheus.Counter
	pending, oldestAge prometheus.Gauge
	lastOK             prometheus.Gauge
	src                PollerSource

	published, deadLettered, badRows, cycles, rolledBack *prometheus.Desc
}

// NewPoller registers the polling publisher's metrics in reg. Call SetSource before serving.
func NewPoller(reg prometheus.Registerer) *Poller {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	}
	p := &Poller{
		bytes:        newCounter("published_bytes_total", "Value bytes of the records acknowledged on their own topic."),
		latency:      newHistogram("commit_to_ack_seconds", "Time from the row's created_at to Kafka's acknowledgement of its record."),
		pending:      g("outbox_pending_rows", "Outbox rows with published_at IS NULL."),
		oldestAge:    g("outbox_oldest_pending_age_seconds", "Age of the oldest outbox row with published_at IS NULL (now - min(created_at)); 0 when none."),
		lastOK:       g("outbox_pending_last_success_timestamp_seconds", "Unix time of the last successful count of the pending rows."),
		published:    desc("records_published_total", "Records acknowledged by Kafka on their own topic."),
		deadLettered: desc("records_dead_lettered_total", "Records parked on the dead-letter destination (and acknowledged there)."),
		badRows:      desc("bad_rows_total", "Outbox rows that could not become records (they are dead-lettered)."),
		cycles:       desc("poll_cycles_total", "Polling cycles that selected rows."),
		rolledBack:   desc("poll_rolled_back_total", "Polling cycles rolled back because Kafka or PostgreSQL was unavailable (the rows stay pending)."),
	}
	var errs *prometheus.CounterVec
	errs, p.errors = newProduceErrors("Produce failures by class: broker_unavailable (retried), rejected and bad_row (dead-lettered), dead_letter_refused and undelivered.")
	reg.MustRegister(p.bytes, p.latency, errs, p.pending, p.oldestAge, p.lastOK, p)
	return p
}

// SetSource sets where scrapes read the poller's counters. Call it once, before serving.
func (p *Poller) SetSource(src PollerSource) {
	if p != nil {
		p.src = src
	}
}

// Published observes one record acknowledged on its topic: its value size and the row's
// created_at (for the latency histogram).
func (p *Poller) Published(valueBytes int, created time.Time) {
	if p == nil {
		return
	}
	p.bytes.Add(float64(valueBytes))
	if !created.IsZero() {
		p.latency.Observe(time.Since(created).Seconds())
	}
}

// ProduceError counts one failure of class c.
func (p *Poller) ProduceError(c ErrorClass) {
	if p != nil && c < numClasses {
		p.errors[c].Inc()
	}
}

// SetPending sets the pending rows and the created_at of the oldest (zero when none).
func (p *Poller) SetPending(rows int64, oldest time.Time) {
	if p == nil {
		return
	}
	p.pending.Set(float64(rows))
	age := 0.0
	if !oldest.IsZero() {
		age = max(time.Since(oldest).Seconds(), 0)
	}
	p.oldestAge.Set(age)
	p.lastOK.SetToCurrentTime()
}

// Describe implements prometheus.Collector.
func (p *Poller) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{p.published, p.deadLettered, p.badRows, p.cycles, p.rolledBack} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one snapshot of the source per scrape.
func (p *Poller) Collect(ch chan<- prometheus.Metric) {
	if p.src == nil {
		return
	}
	s := p.src()
	for _, c := range []struct {
		d *prometheus.Desc
		v int64
	}{{p.published, s.Published}, {p.deadLettered, s.DeadLettered}, {p.badRows, s.BadRows}, {p.cycles, s.Cycles}, {p.rolledBack, s.RolledBack}} {
		ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v))
	}
}
