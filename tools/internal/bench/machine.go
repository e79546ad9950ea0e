package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// MachineState is what the machine did besides the benchmark while one phase was measured,
// from /proc: a phase whose machine was busy is flagged in the table, because its absolute
// figures are those of a slice of the machine (ratios of publishers measured side by side
// still compare).
type MachineState struct {
	Seconds float64 `json:"seconds"`
	// LoadMin and LoadMax are the 1-minute load average's range over the phase, the
	// benchmark's own work included.
	LoadMin float64 `json:"load_min"`
	LoadMax float64 `json:"load_max"`
	// StealPct is the CPU time the hypervisor gave to other guests, % of the machine's.
	StealPct float64 `json:"steal_pct"`
	// OthersCores is the CPU used by processes outside the benchmark (its own process and
	// children: the publishers, load writers, consumers, Connect workers) and its services
	// (the PostgreSQL server and the Kafka broker it talks to, when on this host), in cores
	// on average. Top names the largest of them.
	OthersCores float64  `json:"others_cores"`
	Top         []string `json:"others_top,omitempty"`
	// Busy is set when OthersCores or StealPct passed BusyCores or BusySteal: Why says which.
	Busy bool   `json:"busy"`
	Why  string `json:"why,omitempty"`
	// UsedCores is the CPU the whole machine used (all processes, the kernel's interrupts,
	// not idle, I/O wait or steal), of CPUs: a phase near CPUs cores was bound by the
	// machine, whichever process waited. ServerCores and BrokerCores are the PostgreSQL
	// server's processes (walsenders and the load's backends) and the Kafka broker, when they
	// run on this host.
	UsedCores   float64 `json:"used_cores,omitempty"`
	CPUs        int     `json:"cpus,omitempty"`
	ServerCores float64 `json:"server_cores,omitempty"`
	BrokerCores float64 `json:"broker_cores,omitempty"`
}

// The thresholds above which a phase's machine is flagged busy: a fifth of one core used
// by others, or 5 % of the machine stolen.
const (
	BusyCores = 0.2
	BusySteal = 5.0
)

// String is the table's cell: "0.03 cores, steal 0 %, load 1.2–2.0", with "**busy**"
// in front when flagged.
func (m *MachineState) String() string {
	if m == nil || m.Seconds == 0 {
		return "–"
	}
	s := fmt.Sprintf("others %.2f cores, steal %.0f %%, load %.1f–%.1f", m.OthersCores, m.StealPct, m.LoadMin, m.LoadMax)
	if m.CPUs > 0 {
		s += fmt.Sprintf("; used %.2f of %d cores (PostgreSQL %.2f, Kafka %.2f)", m.UsedCores, m.CPUs, m.ServerCores, m.BrokerCores)
	}
	if m.Busy {
		s = "**busy**: " + s
	}
	return s
}

// worst returns the busiest of states (the most others' CPU), or nil.
func worst(states []*MachineState) *MachineState {
	var w *MachineState
	for _, s := range states {
		if s != nil && (w == nil || s.OthersCores+s.StealPct/100*float64(runtime.NumCPU()) > w.OthersCores+w.StealPct/100*float64(runtime.NumCPU())) {
			w = s
		}
	}
	return w
}

// machineWatch samples /proc once a second from start until stop.
type machineWatch struct {
	fs      procfs.FS
	ours    ourProcs
	started time.Time
	stopCh  chan struct{}
	done    chan struct{}
	own     atomic.Int64 // the CPU its periodic samples took, ns

	mu      sync.Mutex
	loadMin float64
	loadMax float64
	last    map[int]procSample // per pid: the previous sample
	others  map[string]float64 // CPU seconds of other processes, by command name
	server  float64            // CPU seconds of the PostgreSQL server's processes
	broker  float64            // and of the Kafka broker's
	cpu0    procfs.CPUStat
	cpu1    procfs.CPUStat
}

type procSample struct {
	start uint64 // starttime, to tell a reused pid
	cpu   float64
	comm  string
	ppid  int
}

// ourProcs are the roots of the process trees that count as the benchmark's own: the
// benchmark itself, the PostgreSQL server's postmaster and the Kafka broker (0 when not on
// this host), which server and broker name apart.
type ourProcs struct {
	roots          []int
	server, broker int
}

// watchMachine starts sampling. Without /proc (not Linux) it returns a watch that reports
// nothing.
func (e *env) watchMachine() *machineWatch {
	w := &machineWatch{started: time.Now(), stopCh: make(chan struct{}), done: make(chan struct{}),
		last: map[int]procSample{}, others: map[string]float64{}, ours: e.ours}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		close(w.done)
		return w
	}
	w.fs = fs
	if st, err := fs.Stat(); err == nil {
		w.cpu0, w.cpu1 = st.CPUTotal, st.CPUTotal
	}
	w.sample(true)
	go func() {
		defer close(w.done)
		// On a thread of its own, so that its samples' CPU can be told apart (own): a
		// reference measured in the benchmark's process (rawSteady) leaves it out.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-w.stopCh:
				w.sample(false)
				return
			case <-t.C:
				cpu0 := threadCPU()
				w.sample(false)
				w.own.Add(int64(threadCPU() - cpu0))
			}
		}
	}()
	return w
}

// sample reads every process's CPU time and adds what processes outside the benchmark used
// since the last sample (first: only remembers).
func (w *machineWatch) sample(first bool) {
	procs, err := w.fs.AllProcs()
	if err != nil {
		return
	}
	ticks := 100.0 // USER_HZ on Linux
	now := map[int]procSample{}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue
		}
		now[p.PID] = procSample{start: st.Starttime, cpu: float64(st.UTime+st.STime) / ticks, comm: st.Comm, ppid: st.PPID}
	}
	la, _ := w.fs.LoadAvg()
	st, stErr := w.fs.Stat()
	w.mu.Lock()
	defer w.mu.Unlock()
	if la != nil {
		if first || la.Load1 < w.loadMin {
			w.loadMin = la.Load1
		}
		w.loadMax = max(w.loadMax, la.Load1)
	}
	if stErr == nil {
		w.cpu1 = st.CPUTotal
	}
	if !first {
		for pid, s := range now {
			var used float64
			prev, ok := w.last[pid]
			switch {
			case ok && prev.start == s.start:
				used = s.cpu - prev.cpu
			case !ok && s.start > 0:
				// Started since the last sample: all of its CPU is this phase's.
				used = s.cpu
			}
			switch root := w.ours.root(pid, now); {
			case root == 0:
				w.others[s.comm] += used
			case root == w.ours.server:
				w.server += used
			case root == w.ours.broker:
				w.broker += used
			}
		}
	}
	w.last = now
}

// root returns the root that pid descends from (in the process table now), or 0.
func (o ourProcs) root(pid int, now map[int]procSample) int {
	for i := 0; pid > 1 && i < 64; i++ {
		if slices.Contains(o.roots, pid) {
			return pid
		}
		pid = now[pid].ppid
	}
	return 0
}

// stop ends the sampling and returns the phase's machine state.
func (w *machineWatch) stop() *MachineState {
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	el := time.Since(w.started).Seconds()
	m := &MachineState{Seconds: el, LoadMin: w.loadMin, LoadMax: w.loadMax}
	if w.fs == (procfs.FS{}) || el <= 0 {
		return m
	}
	total := cpuSum(w.cpu1) - cpuSum(w.cpu0)
	if total > 0 {
		m.StealPct = 100 * (w.cpu1.Steal - w.cpu0.Steal) / total
		idle := w.cpu1.Idle + w.cpu1.Iowait + w.cpu1.Steal - (w.cpu0.Idle + w.cpu0.Iowait + w.cpu0.Steal)
		m.CPUs = runtime.NumCPU()
		m.UsedCores = max(0, total-idle) / total * float64(m.CPUs)
		m.ServerCores, m.BrokerCores = w.server/el, w.broker/el
	}
	type named struct {
		name string
		sec  float64
	}
	var all []named
	var sum float64
	for n, s := range w.others {
		sum += s
		if s > 0 {
			all = append(all, named{n, s})
		}
	}
	m.OthersCores = sum / el
	slices.SortFunc(all, func(a, b named) int {
		switch {
		case a.sec > b.sec:
			return -1
		case a.sec < b.sec:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	for i := 0; i < len(all) && i < 3; i++ {
		m.Top = append(m.Top, fmt.Sprintf("%s %.2f cores", all[i].name, all[i].sec/el))
	}
	var why []string
	if m.OthersCores >= BusyCores {
		why = append(why, fmt.Sprintf("other processes used %.2f cores (≥ %.1f)", m.OthersCores, BusyCores))
	}
	if m.StealPct >= BusySteal {
		why = append(why, fmt.Sprintf("the hypervisor stole %.0f %% of the CPU (≥ %.0f %%)", m.StealPct, BusySteal))
	}
	m.Busy, m.Why = len(why) > 0, strings.Join(why, "; ")
	return m
}

// ownCPU is the CPU the watch's periodic samples have taken so far (in this process).
func (w *machineWatch) ownCPU() time.Duration { return time.Duration(w.own.Load()) }

// threadCPU is the calling thread's utime+stime so far (RUSAGE_THREAD); 0 where there is none.
func threadCPU() time.Duration {
	const rusageThread = 1 // Linux's RUSAGE_THREAD
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cpuSum(c procfs.CPUStat) float64 {
	return c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
}

// findOurs finds the benchmark's own process trees: itself, the PostgreSQL postmaster (the
// parent of a backend of the pool) and the process listening on the first broker's port,
// when they run on this host.
func (e *env) findOurs(ctx context.Context) ourProcs {
	o := ourProcs{roots: []int{os.Getpid()}}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return o
	}
	var backend int
	if e.pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend) == nil {
		if p, err := fs.Proc(backend); err == nil {
			if st, err := p.Stat(); err == nil && st.PPID > 1 {
				o.roots, o.server = append(o.roots, st.PPID), st.PPID
			}
		}
	}
	if len(e.cfg.Brokers) > 0 {
		if pid := listener(fs, e.cfg.Brokers[0]); pid > 0 {
			o.roots, o.broker = append(o.roots, pid), pid
		}
	}
	return o
}

// listener returns the pid of the process with a listening socket on addr's port, or 0.
func listener(fs procfs.FS, addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0
	}
	var port uint64
	if _, err := fmt.Sscan(addr[i+1:], &port); err != nil {
		return 0
	}
	inodes := map[string]bool{}
	//nolint:staticcheck // NetTCP reads /proc/net/tcp, which is all the bench needs: no netlink socket for a lookup a second
	for _, list := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		lines, err := list()
		if err != nil {
			continue
		}
		for _, l := range lines {
			if l.LocalPort == port && l.St == 10 { // TCP_LISTEN
				inodes[fmt.Sprintf("socket:[%d]", l.Inode)] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return 0
	}
	for _, p := range procs {
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			continue
		}
		for _, t := range targets {
			if inodes[t] {
				return p.PID
			}
		}
	}
	return 0
}
