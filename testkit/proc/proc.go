// Package proc runs a program as a child process, for the tests, the benchmark and the chaos
// soak, which all run the real cdc-relay (and its peers) that way: start it with its output going
// to a writer, wait for it, stop it with SIGTERM and a deadline, kill it -9, read its exit and its
// peak memory.
//
// Start starts one goroutine per process, which waits for its exit and then closes Done; nothing
// else runs in the background, and nothing takes a context: a caller that gives up kills.
package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Process is a started child process.
type Process struct {
	cmd   *exec.Cmd
	done  chan struct{}
	err   error // from Wait; read after done
	ended time.Time
}

// Start runs bin with args, its environment this process's plus env, its stdout and stderr
// going to output (discarded if nil).
func Start(output io.Writer, env []string, bin string, args ...string) (*Process, error) {
	p := &Process{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = output, output
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.ended = time.Now()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err returns nil if the process exited 0, else why not (an *exec.ExitError for an exit code or
// a signal). Only meaningful once Done is closed.
func (p *Process) Err() error { return p.err }

// ExitCode returns the exit code (-1 if a signal ended it). Only meaningful once Done is closed.
func (p *Process) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// Signal returns the signal that ended the process, 0 if it exited by itself. Only meaningful
// once Done is closed.
func (p *Process) Signal() syscall.Signal {
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// Ended returns when the exit was seen. Only meaningful once Done is closed.
func (p *Process) Ended() time.Time { return p.ended }

// CPU returns the user and system CPU time of the exited process (0 while it runs).
func (p *Process) CPU() time.Duration {
	if !p.Exited() {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// Send sends sig to the process (nothing if it has exited).
func (p *Process) Send(sig syscall.Signal) {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Stop sends SIGTERM and waits for the exit, SIGKILL after timeout. It returns ErrIgnoredTerm
// if the process had to be killed.
func (p *Process) Stop(timeout time.Duration) error {
	p.Send(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%w for %s", ErrIgnoredTerm, timeout)
	}
}

// ErrIgnoredTerm is Stop's error when the process ignored SIGTERM and was killed.
var ErrIgnoredTerm = errors.New("ignored SIGTERM")

// Kill kills the process with SIGKILL and waits for the exit.
func (p *Process) Kill() {
	p.Send(syscall.SIGKILL)
	<-p.done
}

// PeakRSS returns the peak resident set size (VmHWM) of a live process in bytes: the high-water
// mark of the program's own memory (unlike rusage's maxrss it does not count the parent's image
// before exec).
func PeakRSS(pid int) (int64, error) {
	st, err := status(pid)
	return int64(st.VmHWM), err
}

// RSS returns the resident set size (VmRSS) of a live process in bytes.
func RSS(pid int) (int64, error) {
	st, err := status(pid)
	return int64(st.VmRSS), err
}

// status reads /proc/PID/status (a zero status with the error).
func status(pid int) (procfs.ProcStatus, error) {
	pp, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStatus{}, err
	}
	return pp.NewStatus()
}
