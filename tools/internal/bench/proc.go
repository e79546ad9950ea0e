package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/build"
	runner "github.com/cdc-relay/cdc-relay/testkit/proc"
)

// BuildRelay builds cmd/cdc-relay of the module around the working directory into dir and
// returns the binary's path.
func BuildRelay(ctx context.Context, dir string) (string, error) {
	return build.Relay(ctx, dir, false)
}

// proc is a publisher, pg_recvlogical or a Connect worker running as a child process
// (testkit/proc), its output in a log file and its peak RSS sampled while it runs.
type proc struct {
	*runner.Process
	name    string
	log     *os.File
	started time.Time
	hwm     atomic.Int64 // VmHWM, sampled every 50ms while the process runs
}

func startProc(name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, log: f, started: time.Now()}
	if p.Process, err = runner.Start(f, env, bin, args...); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	go func() {
		<-p.Done()
		f.Close()
	}()
	go p.sampleRSS()
	return p, nil
}

// stop sends SIGTERM and waits for the exit (SIGKILL after timeout). A publisher stopped
// this way exits 0; anything else is an error that names the log.
func (p *proc) stop(timeout time.Duration) error {
	if err := p.Stop(timeout); err != nil {
		return fmt.Errorf("bench: %s %w (log %s)", p.name, err, p.log.Name())
	}
	return p.exitErr("")
}

// wait waits for the process to exit by itself.
func (p *proc) wait(ctx context.Context) error {
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Kill()
		return ctx.Err()
	}
	return p.exitErr("")
}

// failed returns a non-nil error if the process has exited before it was asked to.
func (p *proc) failed() error {
	if !p.Exited() {
		return nil
	}
	return p.exitErr(" exited early")
}

// exitErr names the log's tail if the exited process failed.
func (p *proc) exitErr(what string) error {
	if p.Err() == nil && what == "" {
		return nil
	}
	return fmt.Errorf("bench: %s%s: %v (log %s:\n%s)", p.name, what, p.Err(), p.log.Name(), tail(p.log.Name(), 20))
}

// sampleRSS keeps the process's VmHWM until it exits.
func (p *proc) sampleRSS() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		p.readHWM()
		select {
		case <-p.Done():
			return
		case <-t.C:
		}
	}
}

func (p *proc) readHWM() {
	if v, err := runner.PeakRSS(p.PID()); err == nil && v > p.hwm.Load() {
		p.hwm.Store(v)
	}
}

// peakRSS returns the process's peak resident set (VmHWM) in bytes: read now if it runs,
// else the last sample.
func (p *proc) peakRSS() int64 {
	if !p.Exited() {
		p.readHWM()
	}
	return p.hwm.Load()
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
