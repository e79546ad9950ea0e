package bench

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, 100 on every Linux
// architecture Go supports.
const clockTick = 10 * time.Millisecond

// procStat is the part of /proc/<pid>/stat the benchmark reads.
type procStat struct {
	comm  string        // the executable's name: "postgres" for every Postgres process
	cpu   time.Duration // utime+stime
	start uint64        // starttime in clock ticks after boot: tells a process from a later one with its pid
}

// readProcStat reads /proc/<pid>/stat.
func readProcStat(pid int) (procStat, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procStat{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return procStat{}, err
	}
	return procStat{comm: st.Comm, cpu: time.Duration(st.UTime+st.STime) * clockTick, start: st.Starttime}, nil
}

// walsenderWatch samples the CPU time of the walsender serving one slot during a drain. It
// learns the walsender's pid from pg_replication_slots.active_pid and reads /proc/<pid>/stat,
// which works only when Postgres runs on this machine (and in the benchmark's pid
// namespace): otherwise it measures nothing, and never fails the drain.
type walsenderWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu   sync.Mutex
	pid  int           // 0 until the slot is active
	want procStat      // comm and start of the walsender, from the first read
	cpu  time.Duration // the last value read
	ok   bool          // cpu holds a reading
	gone bool          // the walsender has exited (or was not readable): stop reading
}

// watchWalsender starts sampling the CPU time of slot's walsender: it asks for the slot's
// active_pid every 20ms until the slot is active, then reads the walsender's
// /proc/<pid>/stat every 50ms. Call stop when the drain is over.
func (e *env) watchWalsender(ctx context.Context, slot string) *walsenderWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &walsenderWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			var pid *int32
			err := e.pool.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&pid)
			if err == nil && pid != nil {
				w.mu.Lock()
				w.pid = int(*pid)
				w.mu.Unlock()
				break
			}
			if !sleep(ctx, 20*time.Millisecond) {
				return
			}
		}
		for w.sample() && sleep(ctx, 50*time.Millisecond) {
		}
	}()
	return w
}

// sample reads the walsender's CPU time once and reports whether it is worth reading again.
// A process that is gone, not readable, or no longer the walsender first read (its pid taken
// by another process) ends the sampling; the last value read stands.
func (w *walsenderWatch) sample() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pid == 0 || w.gone {
		return !w.gone
	}
	st, err := readProcStat(w.pid)
	switch {
	case err != nil:
		w.gone = true
	case !w.ok && st.comm != "postgres":
		// Not a Postgres process: Postgres runs on another host or in another pid
		// namespace, where this pid means something else.
		w.gone = true
	case w.ok && (st.comm != w.want.comm || st.start != w.want.start):
		w.gone = true
	default:
		if !w.ok {
			w.want = st
		}
		w.cpu, w.ok = st.cpu, true
	}
	return !w.gone
}

// stop ends the sampling, reads once more (the walsender of a run drain still runs; that of
// pg_recvlogical may be gone, and then the last sample counts) and returns the walsender's
// CPU time, with ok false when it could not be measured. It may be called more than once:
// later calls return what the first one did.
func (w *walsenderWatch) stop() (cpu time.Duration, ok bool) {
	w.once.Do(func() {
		w.cancel()
		<-w.done
		w.sample()
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cpu, w.ok
}

// sleep waits for d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
