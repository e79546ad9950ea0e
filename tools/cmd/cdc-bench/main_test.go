package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/cdc-relay/cdc-relay/tools/internal/bench"
)

// --publishers selects any subset, Debezium as shipped and tuned included, with extra
// settings after +.
func TestPublishers(t *testing.T) {
	pubs, err := publishers("debezium-tuned, run,debezium+max.batch.size=512+worker.offset.flush.interval.ms=5000")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pubs {
		names = append(names, p.Name)
	}
	if want := []string{"debezium tuned", "run", "debezium max.batch.size=512 worker.offset.flush.interval.ms=5000"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	if !pubs[0].Debezium || !slices.Equal(pubs[0].Args, bench.DebeziumTuned) || pubs[1].Debezium || !pubs[2].Debezium ||
		!slices.Equal(pubs[2].Args, []string{"max.batch.size=512", "worker.offset.flush.interval.ms=5000"}) {
		t.Errorf("%+v", pubs)
	}
	// The preset is not shared: extra settings on one publisher do not leak into the next.
	more, _ := publishers("debezium-tuned+max.batch.size=1,debezium-tuned+max.batch.size=2")
	if len(more[0].Args) != len(bench.DebeziumTuned)+1 || more[0].Args[len(bench.DebeziumTuned)] != "max.batch.size=1" ||
		more[1].Args[len(bench.DebeziumTuned)] != "max.batch.size=2" {
		t.Errorf("%+v", more)
	}
	// run-eos is run with --delivery exactly-once, with extra arguments like run's.
	eos, err := publishers("run,run-eos+--transaction-interval=50ms")
	if err != nil {
		t.Fatal(err)
	}
	if eos[0].ExactlyOnce || !eos[1].ExactlyOnce || eos[1].Name != "run-eos --transaction-interval=50ms" || !slices.Equal(eos[1].Args, []string{"--transaction-interval=50ms"}) {
		t.Errorf("%+v", eos)
	}
	for spec, want := range map[string]string{
		"kafka-connect":      "want run, run-eos, poll:<interval>, debezium or debezium-tuned",
		"debezium#/tmp/x":    "#BINARY is for cdc-relay builds",
		"debezium:something": "want run, run-eos, poll:<interval>, debezium or debezium-tuned",
	} {
		if _, err := publishers(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
}
