package testenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/build"
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

// syncBuffer is a bytes.Buffer safe for the writer goroutine and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Proc is a running cdc-relay process.
type Proc struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	done   chan struct{}
	code   int
	signal syscall.Signal
}

// Start runs bin with args; env entries are added to the test's environment. The process is
// stopped at cleanup, and its output is logged if the test failed.
func Start(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{cmd: exec.Command(bin, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.signal = ws.Signal()
			}
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop(t)
		if t.Failed() {
			t.Logf("cdc-relay %s output:\n%s", strings.Join(args, " "), p.Output())
		}
	})
	return p
}

// Output returns what the process wrote so far (stdout and stderr).
func (p *Proc) Output() string { return p.out.String() }

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Wait waits up to timeout for the process to exit and returns its exit code and the
// signal that killed it (0 if none).
func (p *Proc) Wait(t testing.TB, timeout time.Duration) (int, syscall.Signal) {
	t.Helper()
	select {
	case <-p.done:
		return p.code, p.signal
	case <-time.After(timeout):
		t.Fatalf("cdc-relay did not exit within %s; output:\n%s", timeout, p.Output())
		return 0, 0
	}
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after 60s), returning the exit code.
func (p *Proc) Stop(t testing.TB) int {
	t.Helper()
	if p.Exited() {
		return p.code
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("cdc-relay ignored SIGTERM for 60s")
	}
	return p.code
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
func RSSPeak(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("VmHWM not found")
}
