package main

import (
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// drainProcs gives `run` one processor (GOMAXPROCS 1) while its stream keeps up with the
// server, and Go's default (the machine's CPUs, or the container's CPU limit, kept up to date)
// once it has drained a backlog for raiseProcsAfter (replication.Config.OnDrain). Caught up,
// the relay's work is a chain of hand-overs between goroutines for each transaction (the
// stream, the pipeline, franz-go's producer and connection, the confirm): on one processor
// they run in turn on one thread instead of waking each other's threads through the kernel.
// Side by side on 2 CPUs that cost about a quarter less CPU at 500-2,000 rows/s; a drain of
// small rows on one processor was about 15 % slower, hence the default for a drain that
// lasts. A steady load has short drains too (a Begin sent 10 ms after its commit starts one):
// at 5,000 rows/s, about ten a second, which the delay leaves on one processor.
// A GOMAXPROCS set in the environment is the operator's choice: left alone.
type drainProcs struct {
	log      *slog.Logger
	mu       sync.Mutex
	draining bool
	raise    *time.Timer // armed while draining and not yet raised
}

// raiseProcsAfter is how long a drain lasts on one processor.
const raiseProcsAfter = 250 * time.Millisecond

// newDrainProcs starts on one processor and returns the stream's OnDrain, or nil when
// GOMAXPROCS is set in the environment (getenv) or Go would use one processor anyway.
func newDrainProcs(getenv func(string) string, log *slog.Logger) func(draining bool) {
	if getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) <= 1 {
		return nil
	}
	runtime.GOMAXPROCS(1)
	return (&drainProcs{log: log}).onDrain
}

func (p *drainProcs) onDrain(draining bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draining = draining
	switch {
	case draining && p.raise == nil:
		p.raise = time.AfterFunc(raiseProcsAfter, p.raiseNow)
	case draining:
		p.raise.Reset(raiseProcsAfter)
	default:
		if p.raise != nil {
			p.raise.Stop()
		}
		if runtime.GOMAXPROCS(0) != 1 {
			runtime.GOMAXPROCS(1)
			p.log.Debug("caught up: one processor for the Go scheduler")
		}
	}
}

// raiseNow gives a drain that lasted Go's default processors.
func (p *drainProcs) raiseNow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.draining {
		runtime.SetDefaultGOMAXPROCS()
		p.log.Debug("draining a backlog: the Go scheduler's default processors", "gomaxprocs", runtime.GOMAXPROCS(0))
	}
}
