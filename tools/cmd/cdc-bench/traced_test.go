package main

import "testing"

// run-traced is run with its spans exported (bench.Publisher.Traced), and takes extra
// arguments and environment like run.
func TestRunTracedPublisher(t *testing.T) {
	pubs, err := publishers("run,run-traced+--linger=1ms")
	if err != nil {
		t.Fatal(err)
	}
	if len(pubs) != 2 || pubs[0].Traced || !pubs[1].Traced || pubs[1].Poll || pubs[1].Name != "run-traced --linger=1ms" {
		t.Errorf("publishers %+v", pubs)
	}
}

func TestRunTracedSampled(t *testing.T) {
	pubs, err := publishers("run-traced:0.1")
	if err != nil {
		t.Fatal(err)
	}
	if p := pubs[0]; !p.Traced || p.Name != "run-traced 0.1" || len(p.Env) != 2 || p.Env[1] != "OTEL_TRACES_SAMPLER_ARG=0.1" {
		t.Errorf("publisher %+v", p)
	}
	if _, err := publishers("run-traced:2"); err == nil {
		t.Error("ratio 2 accepted")
	}
}
