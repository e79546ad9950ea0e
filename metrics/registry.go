package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every metric name.
const Namespace = "cdc_relay"

// NewRegistry returns a registry with the Go runtime and process collectors, and a
// cdc_relay_info gauge (value 1) labelled with the mode ("run" or "poll") and version.
func NewRegistry(mode, version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   Namespace,
		Name:        "info",
		Help:        "Always 1; the labels say what this process is.",
		ConstLabels: prometheus.Labels{"mode": mode, "version": version},
	})
	info.Set(1)
	reg.MustRegister(info)
	return reg
}

// latencyBuckets spans a sub-millisecond local hop to minutes of backlog.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// newCounter is a counter of the cdc_relay namespace.
func newCounter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
}

// newHistogram is a histogram of the cdc_relay namespace with the latency buckets.
func newHistogram(name, help string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: latencyBuckets})
}

// newProduceErrors is the produce_errors_total counter by class with the help text help, and
// its counter of each class, resolved once so that the hot path only adds.
func newProduceErrors(help string) (*prometheus.CounterVec, [numClasses]prometheus.Counter) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "produce_errors_total", Help: help}, []string{"class"})
	var byClass [numClasses]prometheus.Counter
	for c := range numClasses {
		byClass[c] = vec.WithLabelValues(c.String())
	}
	return vec, byClass
}
