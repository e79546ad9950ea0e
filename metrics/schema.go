package metrics

import "github.com/prometheus/client_golang/prometheus"

// Schema is the schema registry's side of the metrics of a relay or poller that writes values
// in a registry's format (--value-format): whether publishing is paused because the registry
// does not answer, and how often it was. Nil is valid and records nothing.
type Schema struct {
	unavailable prometheus.Gauge
	pauses      prometheus.Counter
}

// NewSchema registers the schema registry metrics on reg.
func NewSchema(reg prometheus.Registerer) *Schema {
	m := &Schema{
		unavailable: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "schema_registry_unavailable",
			Help: "1 while publishing is paused because the schema registry does not answer (unreachable, timed out, 5xx or 429); 0 otherwise."}),
		pauses: newCounter("schema_registry_pauses_total", "Times publishing paused because the schema registry did not answer."),
	}
	reg.MustRegister(m.unavailable, m.pauses)
	return m
}

// Paused records a pause that begins (true) or ends (false).
func (m *Schema) Paused(on bool) {
	if m == nil {
		return
	}
	if on {
		m.unavailable.Set(1)
		m.pauses.Inc()
		return
	}
	m.unavailable.Set(0)
}
