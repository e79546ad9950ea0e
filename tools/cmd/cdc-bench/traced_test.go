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
