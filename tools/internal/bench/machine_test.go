package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// burn keeps n goroutines on a CPU until the returned func is called.
func burn(n int) func() {
	var stop atomic.Bool
	for i := 0; i < n; i++ {
		go func() {
			x := 0
			for !stop.Load() {
				x++
			}
			_ = x
		}()
	}
	return func() { stop.Store(true) }
}

// A process outside the benchmark's trees that uses CPU during a phase makes the phase busy,
// and is named; the same process inside them does not count.
func TestMachineStateFlagsOtherProcesses(t *testing.T) {
	self, err := procfs.Self()
	if err != nil {
		t.Fatal(err)
	}
	st, err := self.Stat()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		roots []int
		other bool
	}{
		{"outside the benchmark", []int{1 << 30}, true},
		{"the benchmark itself", []int{os.Getpid()}, false},
	} {
		e := &env{ours: ourProcs{roots: tc.roots}}
		w := e.watchMachine()
		stopBurn := burn(min(2, runtime.NumCPU()))
		time.Sleep(2500 * time.Millisecond)
		stopBurn()
		m := w.stop()
		// The burn's CPU (some of it, on a machine other sessions share), under this
		// process's name.
		burnt := w.others[st.Comm]
		if tc.other {
			if !m.Busy || burnt < 0.5 || m.OthersCores*m.Seconds < burnt || !strings.Contains(m.Why, "other processes used") {
				t.Errorf("%s: %+v, %.2f s of CPU counted for %s: want busy, with the burn's CPU", tc.name, m, burnt, st.Comm)
			}
			if cell := m.String(); !strings.HasPrefix(cell, "**busy**: others ") {
				t.Errorf("%s: table cell %q", tc.name, cell)
			}
		} else if burnt > 0 {
			t.Errorf("%s: %+v: %.2f s of the benchmark's own CPU counted as another process's", tc.name, m, burnt)
		}
		if m.Seconds < 2 || m.LoadMax < m.LoadMin || m.StealPct < 0 {
			t.Errorf("%s: %+v", tc.name, m)
		}
		// The whole machine's use counts the burn wherever it runs (half a core at least,
		// however busy the machine is), and never more than the machine has.
		if m.CPUs != runtime.NumCPU() || m.UsedCores < 0.5 || m.UsedCores > float64(m.CPUs)+0.01 ||
			!strings.Contains(m.String(), fmt.Sprintf("of %d cores", m.CPUs)) {
			t.Errorf("%s: used %.2f of %d cores (%q)", tc.name, m.UsedCores, m.CPUs, m.String())
		}
	}
}

// The benchmark's own trees are found: this process and, with the services of
// scripts/dev-up.sh on this machine, the postmaster and the Kafka broker.
func TestFindOurs(t *testing.T) {
	if os.Getenv("CDC_RELAY_PG_URL") == "" || os.Getenv("CDC_RELAY_BROKERS") == "" {
		t.Fatal(`CDC_RELAY_PG_URL and CDC_RELAY_BROKERS must be set: run: eval "$(scripts/dev-up.sh)"`)
	}
	ctx := context.Background()
	cfg := Config{OutDir: t.TempDir(), Progress: io.Discard}.withDefaults()
	if !procVisible(ctx, t, cfg) {
		t.Skip("PostgreSQL runs on another host or in another pid namespace")
	}
	e, err := newEnv(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	o := e.findOurs(ctx)
	if len(o.roots) != 3 || o.roots[0] != os.Getpid() || o.server != o.roots[1] || o.broker != o.roots[2] {
		t.Fatalf("roots %v (server %d, broker %d): want this process, the postmaster and the broker", o.roots, o.server, o.broker)
	}
	comm := func(pid int) string {
		p, err := procfs.NewProc(pid)
		if err != nil {
			return err.Error()
		}
		st, err := p.Stat()
		if err != nil {
			return err.Error()
		}
		return st.Comm
	}
	if c := comm(o.roots[1]); c != "postgres" {
		t.Errorf("postmaster %d is %q", o.roots[1], c)
	}
	if c := comm(o.roots[2]); c != "java" {
		t.Errorf("broker %d is %q", o.roots[2], c)
	}
}

// The Connect worker of a debezium publisher is stopped (SIGSTOP) while any other publisher
// runs, continues for its own phases, and still stops at the end of the run.
func TestWorkerPausedWhileOthersRun(t *testing.T) {
	e := fakeWorkerEnv(t, t.TempDir())
	ctx := context.Background()
	f := &fixture{base: "bench_t_1", outbox: "public.bench_t_1"}
	state := func(w *connectWorker) string {
		t.Helper()
		var st string
		err := waitUntil(ctx, 5*time.Second, nil, "", func() (bool, error) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.p.PID()))
			if err != nil {
				return false, err
			}
			st = strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))[0]
			return st != "R", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	launch := func(pub Publisher) *connectWorker {
		t.Helper()
		r, err := e.launch(ctx, pub, f, "slot_"+slug(pub.Name), "", "x")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.finish(); err != nil {
			t.Fatal(err)
		}
		return r.(*debeziumRun).w
	}
	shipped := launch(DebeziumPublishers[0])
	tuned := launch(DebeziumPublishers[1]) // the shipped one's worker is paused for it
	if s := state(shipped); s != "T" {
		t.Errorf("debezium's worker is %q while debezium tuned runs, want T (stopped)", s)
	}
	if s := state(tuned); s == "T" {
		t.Errorf("debezium tuned's worker is stopped during its own phase")
	}
	if again := launch(DebeziumPublishers[0]); again != shipped || state(shipped) == "T" {
		t.Errorf("debezium's worker not continued for its own phase (state %s)", state(shipped))
	}
	e.pauseWorkers(Publisher{Name: "run"})
	for _, w := range []*connectWorker{shipped, tuned} {
		if s := state(w); s != "T" {
			t.Errorf("%s's worker is %q while run runs, want T", w.pub.Name, s)
		}
	}
	done := make(chan struct{})
	go func() { e.stopWorkers(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("stopping paused workers hangs")
	}
	for _, w := range []*connectWorker{shipped, tuned} {
		if !w.p.Exited() {
			w.p.Kill()
			t.Errorf("%s's worker still runs after the run's end", w.pub.Name)
		}
	}
}
