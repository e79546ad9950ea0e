package testenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/build"
	"github.com/cdc-relay/cdc-relay/testkit/proc"
)

var (
	buildMu sync.Mutex
	built   = map[bool]string{}
)

// Binary builds cmd/cdc-relay once per test process (with the race detector when race is
// set) and returns its path.
func Binary(t testing.TB, race bool) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[race]; ok {
		return p
	}
	dir, err := os.MkdirTemp("", "cdc-relay-bin")
	if err != nil {
		t.Fatal(err)
	}
	out, err := build.Relay(context.Background(), dir, race)
	if err != nil {
		t.Fatal(err)
	}
	built[race] = out
	return out
}

// Proc is a running cdc-relay process.
type Proc struct {
	p   *proc.Process
	out *proc.Buffer
}

// Start runs bin with args; env entries are added to the test's environment. The process is
// stopped at cleanup, and its output is logged if the test failed.
func Start(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	out := &proc.Buffer{}
	p, err := proc.Start(out, env, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	r := &Proc{p: p, out: out}
	t.Cleanup(func() {
		r.Stop(t)
		if t.Failed() {
			t.Logf("cdc-relay %s output:\n%s", strings.Join(args, " "), r.Output())
		}
	})
	return r
}

// Output returns what the process wrote so far (stdout and stderr).
func (p *Proc) Output() string { return p.out.String() }

// PID returns the process id.
func (p *Proc) PID() int { return p.p.PID() }

// Wait waits up to timeout for the process to exit and returns its exit code and the
// signal that killed it (0 if none).
func (p *Proc) Wait(t testing.TB, timeout time.Duration) (int, syscall.Signal) {
	t.Helper()
	select {
	case <-p.p.Done():
		return p.p.ExitCode(), p.p.Signal()
	case <-time.After(timeout):
		t.Fatalf("cdc-relay did not exit within %s; output:\n%s", timeout, p.Output())
		return 0, 0
	}
}

// Pause stops the process with SIGSTOP, as a long GC pause or a frozen VM would, until Continue
// (or the test's cleanup, so that the cleanup's SIGTERM is not left pending).
func (p *Proc) Pause(t testing.TB) {
	t.Helper()
	p.p.Send(syscall.SIGSTOP)
	t.Cleanup(p.Continue)
}

// Kill kills the process with SIGKILL (kill -9) and waits up to timeout for it to end.
func (p *Proc) Kill(t testing.TB, timeout time.Duration) {
	t.Helper()
	p.p.Send(syscall.SIGKILL)
	p.Wait(t, timeout)
}

// Continue resumes a paused process with SIGCONT (nothing if it is not paused).
func (p *Proc) Continue() { p.p.Send(syscall.SIGCONT) }

// WaitKilled waits up to timeout for the process, started with a crash hook
// (CDC_RELAY_TEST_CRASH_AFTER_*), to be killed by it, and fails the test if it ended otherwise.
func (p *Proc) WaitKilled(t testing.TB, timeout time.Duration) {
	t.Helper()
	if _, sig := p.Wait(t, timeout); sig != syscall.SIGKILL {
		t.Fatalf("cdc-relay was not killed by its crash hook (signal %v); output:\n%s", sig, p.Output())
	}
}

// Killed reports whether the process was killed with SIGKILL (a crash hook's, or kill -9).
func (p *Proc) Killed() bool { return p.p.Exited() && p.p.Signal() == syscall.SIGKILL }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool { return p.p.Exited() }

// Stop sends SIGTERM and waits for the exit (SIGKILL after 60s), returning the exit code.
func (p *Proc) Stop(t testing.TB) int {
	t.Helper()
	if err := p.p.Stop(60 * time.Second); err != nil {
		t.Errorf("cdc-relay %v", err)
	}
	if p.p.Signal() == syscall.SIGTERM {
		// The Go runtime's default for SIGTERM, before main's signal.NotifyContext: the test
		// stopped the process before waiting for a sign that it had started.
		t.Errorf("cdc-relay died of the SIGTERM before it handled signals: wait for it to start (a log line, a record) before Stop")
	}
	return p.p.ExitCode()
}

// Run runs bin to completion within timeout and returns its output and exit code.
func Run(t testing.TB, timeout time.Duration, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("cdc-relay %s did not finish within %s", strings.Join(args, " "), timeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// RSSPeak returns the peak resident set size (VmHWM) of a live process in bytes.
func RSSPeak(pid int) (int64, error) { return proc.PeakRSS(pid) }

// RSS returns the resident set size (VmRSS) of a live process in bytes.
func RSS(pid int) (int64, error) { return proc.RSS(pid) }
