package metrics

import (
	"net"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrorClass is a produce failure class (DESIGN.md, "Retries are unlimited"). It is the value of
// the class label of cdc_relay_produce_errors_total.
type ErrorClass uint8

const (
	// ClassBroker is a broker that could not be reached or a request that failed on the
	// wire. The client retries; nothing is dropped. Counted per failed connection or request.
	ClassBroker ErrorClass = iota
	// ClassRejected is a record Kafka refused for good (too large, invalid topic, not
	// authorized): it is dead-lettered.
	ClassRejected
	// ClassBadRow is a row or logical message that cannot become a record: dead-lettered.
	ClassBadRow
	// ClassDeadLetterRefused is a dead letter the dead-letter destination refused: the relay
	// stops without confirming past it.
	ClassDeadLetterRefused
	// ClassUndelivered is any other record that failed for good (the relay stops and replays).
	ClassUndelivered
	numClasses
)

func (c ErrorClass) String() string {
	switch c {
	case ClassBroker:
		return "broker_unavailable"
	case ClassRejected:
		return "rejected"
	case ClassBadRow:
		return "bad_row"
	case ClassDeadLetterRefused:
		return "dead_letter_refused"
	case ClassUndelivered:
		return "undelivered"
	}
	return "unknown"
}

// RelaySnapshot is what a relay reports when Prometheus scrapes.
type RelaySnapshot struct {
	Published       int64         // records acknowledged on their own topic
	PublishedBytes  int64         // their value bytes
	DeadLettered    int64         // records acknowledged on the dead-letter destination
	BadRows         int64         // rows that could not become records
	Transactions    int64         // transactions seen
	RecordsInFlight int64         // records handed to the producer and not yet acknowledged
	TxnsInFlight    int64         // transactions not yet confirmable
	Confirmed       pglogrepl.LSN // the flush position confirmed (or about to be) to PostgreSQL
	OldestUnacked   time.Time     // commit time of the oldest unconfirmed transaction; zero if none
	State           string        // replication state: connecting, streaming, standby, reconnecting, stopped
	Reconnects      int64         // replication sessions started after the first
	ParkedInTable   int64         // dead letters the dead-letter topic refused, parked in the PostgreSQL table
	KafkaOutages    int64         // times Kafka stopped acknowledging while records were in flight
	KafkaProbes     int64         // metadata probes sent during those outages
	KeyOrderAtRisk  int64         // records acknowledged ahead of the dead letter of an earlier record of their key
}

// RelaySource is implemented by *relay.Relay. MetricsSnapshot is called once per scrape,
// from the HTTP goroutine; it must be safe for concurrent use.
type RelaySource interface {
	MetricsSnapshot() RelaySnapshot
}

// States lists the replication states, each a series of cdc_relay_replication_state.
var States = []string{"connecting", "streaming", "standby", "reconnecting", "stopped"}

// Relay holds the metrics of `cdc-relay run`. Its methods are safe for concurrent use and are
// no-ops on a nil *Relay.
type Relay struct {
	latency prometheus.Histogram
	toSend  prometheus.Histogram
	errors  [numClasses]prometheus.Counter
	src     RelaySource
	// Exactly-once mode's Kafka transactions (zero in at-least-once mode).
	txnCommits, txnAborts prometheus.Counter
	txnCommit             prometheus.Histogram

	published, bytes, deadLettered, badRows, txns, reconnects   *prometheus.Desc
	parked, outages, probes, orderAtRisk                        *prometheus.Desc
	inFlight, txnsInFlight, confirmed, oldestAge, state, active *prometheus.Desc
}

// NewRelay registers the relay metrics in reg. Call SetSource before the first scrape.
func NewRelay(reg prometheus.Registerer) *Relay {
	m := &Relay{
		latency: newHistogram("commit_to_ack_seconds",
			"Time from a transaction's commit in PostgreSQL to Kafka's acknowledgement of each of its records."),
		toSend: newHistogram("commit_to_send_seconds",
			"Time from a transaction's commit in PostgreSQL to the walsender's sending of its first message, both on the server's clock: "+
				"PostgreSQL's share of commit_to_ack_seconds (waking the walsender, decoding, a backlog ahead of it)."),
		txnCommits: newCounter("kafka_transactions_committed_total",
			"Kafka transactions committed with their checkpoint (--delivery exactly-once); the confirmed position follows each."),
		txnAborts: newCounter("kafka_transactions_aborted_total",
			"Kafka transactions aborted or not committed (--delivery exactly-once): nothing of them is visible to read_committed consumers, and they replay."),
		txnCommit: newHistogram("kafka_transaction_commit_seconds",
			"Time a Kafka commit takes (--delivery exactly-once): the checkpoint's produce, the flush and EndTxn."),
		published:    desc("records_published_total", "Records acknowledged by Kafka on their own topic."),
		bytes:        desc("published_bytes_total", "Value bytes of the records acknowledged on their own topic."),
		deadLettered: desc("records_dead_lettered_total", "Records parked on the dead-letter destination (and acknowledged there)."),
		badRows:      desc("bad_rows_total", "Outbox rows and logical messages that could not become records (they are dead-lettered)."),
		txns:         desc("transactions_total", "Transactions received from the replication stream."),
		reconnects:   desc("reconnects_total", "Replication sessions started after the first (connection lost, server restarted)."),
		parked:       desc("records_parked_in_table_total", "Dead letters the dead-letter topic refused too, committed to the PostgreSQL dead-letter table."),
		outages:      desc("kafka_outages_total", "Times Kafka stopped acknowledging while records were in flight (the relay held its position)."),
		probes:       desc("kafka_probes_total", "Metadata probes sent to Kafka during outages (one per backoff cycle)."),
		orderAtRisk: desc("key_order_at_risk_total", "Records acknowledged ahead of the dead letter of an earlier record of their key "+
			"(franz-go took them while it failed that record): the key stays in order only if the letter is parked before the relay stops."),
		inFlight:     desc("records_in_flight", "Records handed to the Kafka producer and not yet acknowledged."),
		txnsInFlight: desc("transactions_in_flight", "Transactions received whose position cannot be confirmed yet."),
		confirmed:    desc("confirmed_lsn", "The flush position (LSN, as a byte offset) the relay confirmed or is about to confirm to PostgreSQL."),
		oldestAge:    desc("oldest_unacked_age_seconds", "Age since commit of the oldest transaction not yet acknowledged by Kafka; 0 when none."),
		state:        prometheus.NewDesc(Namespace+"_replication_state", "1 for the replication state the relay is in.", []string{"state"}, nil),
		active:       desc("active", "1 when this relay holds the slot and streams; 0 when standby, connecting or stopped."),
	}
	var errs *prometheus.CounterVec
	errs, m.errors = newProduceErrors("Produce failures by class: broker_unavailable (retried), rejected and bad_row (dead-lettered), dead_letter_refused and undelivered (the relay stops and replays).")
	reg.MustRegister(m.latency, m.toSend, errs, m.txnCommits, m.txnAborts, m.txnCommit, m)
	return m
}

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(Namespace+"_"+name, help, nil, nil)
}

// SetSource sets where scrapes read the relay's counters. Call it once, before serving.
func (m *Relay) SetSource(src RelaySource) {
	if m != nil {
		m.src = src
	}
}

// Acked observes the commit-to-acknowledgement latency of one record.
func (m *Relay) Acked(commit time.Time) {
	if m != nil && !commit.IsZero() {
		m.latency.Observe(time.Since(commit).Seconds())
	}
}

// Sent observes, for one transaction, its commit time to the time the walsender sent its
// Begin (XLogData's send time), both the server's; a zero time (none sent) is not observed.
func (m *Relay) Sent(commit, sent time.Time) {
	if m != nil && !commit.IsZero() && !sent.IsZero() {
		m.toSend.Observe(max(0, sent.Sub(commit)).Seconds())
	}
}

// TxnCommitted counts one Kafka transaction committed, whose commit took took.
func (m *Relay) TxnCommitted(took time.Duration) {
	if m != nil {
		m.txnCommits.Inc()
		m.txnCommit.Observe(took.Seconds())
	}
}

// TxnAborted counts one Kafka transaction aborted or not committed.
func (m *Relay) TxnAborted() {
	if m != nil {
		m.txnAborts.Inc()
	}
}

// ProduceError counts one failure of class c.
func (m *Relay) ProduceError(c ErrorClass) {
	if m != nil && c < numClasses {
		m.errors[c].Inc()
	}
}

// KafkaHooks returns franz-go hooks that count failed broker connections and requests as
// ClassBroker. Pass it to the producer with kgo.WithHooks.
func (m *Relay) KafkaHooks() kgo.Hook { return brokerHooks{m} }

type brokerHooks struct{ m *Relay }

func (h brokerHooks) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.m.ProduceError(ClassBroker)
	}
}

func (h brokerHooks) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		h.m.ProduceError(ClassBroker)
	}
}

// Describe implements prometheus.Collector.
func (m *Relay) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.published, m.bytes, m.deadLettered, m.badRows, m.txns, m.reconnects,
		m.parked, m.outages, m.probes, m.orderAtRisk, m.inFlight, m.txnsInFlight, m.confirmed, m.oldestAge, m.state, m.active} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one snapshot of the source per scrape.
func (m *Relay) Collect(ch chan<- prometheus.Metric) {
	if m.src == nil {
		return
	}
	s := m.src.MetricsSnapshot()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(m.published, s.Published)
	counter(m.bytes, s.PublishedBytes)
	counter(m.deadLettered, s.DeadLettered)
	counter(m.badRows, s.BadRows)
	counter(m.txns, s.Transactions)
	counter(m.reconnects, s.Reconnects)
	counter(m.parked, s.ParkedInTable)
	counter(m.outages, s.KafkaOutages)
	counter(m.probes, s.KafkaProbes)
	counter(m.orderAtRisk, s.KeyOrderAtRisk)
	gauge(m.inFlight, float64(s.RecordsInFlight))
	gauge(m.txnsInFlight, float64(s.TxnsInFlight))
	gauge(m.confirmed, float64(s.Confirmed))
	age := 0.0
	if !s.OldestUnacked.IsZero() {
		age = max(time.Since(s.OldestUnacked).Seconds(), 0)
	}
	gauge(m.oldestAge, age)
	for _, st := range States {
		gauge(m.state, b2f(st == s.State), st)
	}
	gauge(m.active, b2f(s.State == "streaming"))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
