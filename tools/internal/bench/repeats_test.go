package bench

import (
	"strings"
	"testing"
	"time"
)

// A publisher's repeated runs at one rate merge into the medians of each figure, with every
// run listed, all latencies kept and the busiest machine.
func TestMergeSteadyTakesMedians(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	busy := &MachineState{Seconds: 5, OthersCores: 0.9, Busy: true, Why: "x"}
	rs := []SteadyResult{
		{Publisher: "run", Rate: 2000, P50: ms(1), P99: ms(30), CPU: 3 * time.Second, Events: 10_000, Records: 2, Latencies: []time.Duration{ms(1), ms(30)}, Achieved: 2000},
		{Publisher: "run", Rate: 2000, P50: ms(9), P99: ms(10), CPU: 1 * time.Second, Events: 10_000, Records: 2, Latencies: []time.Duration{ms(9), ms(10)}, Achieved: 1900, Machine: busy},
		{Publisher: "run", Rate: 2000, P50: ms(2), P99: ms(20), CPU: 2 * time.Second, Events: 10_000, Records: 2, Latencies: []time.Duration{ms(2), ms(20)}, Achieved: 1950},
	}
	m := mergeSteady(rs)
	if m.P50 != ms(2) || m.P99 != ms(20) || m.Achieved != 1950 || m.Records != 6 || m.Events != 30_000 || len(m.Latencies) != 6 || len(m.Runs) != 3 {
		t.Errorf("%+v", m)
	}
	if got := cpuPer10k(m.CPU, m.Events); got < 1.99 || got > 2.01 {
		t.Errorf("CPU per 10k events %.3f, want the median run's 2.0", got)
	}
	if m.Machine != busy || m.Latencies[0] != ms(1) || m.Latencies[5] != ms(30) {
		t.Errorf("machine %+v, latencies %v", m.Machine, m.Latencies)
	}
	r := &Report{Config: ReportConfig{SteadyRepeats: 3, Rates: []int{2000}}, Steady: []SteadyResult{m}}
	if md := r.Markdown(); !strings.Contains(md, "- run at 2000 rows/s: 1.0 / 30.0, 3.000; 9.0 / 10.0, 1.000 (busy); 2.0 / 20.0, 2.000") {
		t.Errorf("table.md:\n%s", md)
	}
	if one := mergeSteady(rs[:1]); one.P50 != ms(1) || len(one.Runs) != 0 {
		t.Errorf("a single run changed: %+v", one)
	}
}
