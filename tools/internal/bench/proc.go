package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/build"
)

// BuildRelay builds cmd/cdc-relay of the module around the working directory into dir and
// returns the binary's path.
func BuildRelay(ctx context.Context, dir string) (string, error) {
	return build.Relay(ctx, dir, false)
}

// proc is a publisher or pg_recvlogical running as a child process, its output in a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	log     *os.File
	started time.Time
	done    chan struct{}
	ended   time.Time
	err     error        // from Wait
	hwm     atomic.Int64 // VmHWM, sampled every 50ms while the process runs
}

func startProc(name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: exec.Command(bin, args...), log: f, done: make(chan struct{})}
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: start %s: %w", name, err)
	}
	go p.sampleRSS()
	go func() {
		p.err = p.cmd.Wait()
		p.ended = time.Now()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits for the exit (SIGKILL after timeout). A publisher stopped
// this way exits 0; anything else is an error that names the log.
func (p *proc) stop(timeout time.Duration) error {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(timeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			return fmt.Errorf("bench: %s ignored SIGTERM for %s (log %s)", p.name, timeout, p.log.Name())
		}
	}
	if p.err != nil {
		return fmt.Errorf("bench: %s: %w (log %s:\n%s)", p.name, p.err, p.log.Name(), tail(p.log.Name(), 20))
	}
	return nil
}

// wait waits for the process to exit by itself.
func (p *proc) wait(ctx context.Context) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
		return ctx.Err()
	}
	if p.err != nil {
		return fmt.Errorf("bench: %s: %w (log %s:\n%s)", p.name, p.err, p.log.Name(), tail(p.log.Name(), 20))
	}
	return nil
}

// failed returns a non-nil error if the process has exited before it was asked to.
func (p *proc) failed() error {
	if !p.exited() {
		return nil
	}
	return fmt.Errorf("bench: %s exited early: %v (log %s:\n%s)", p.name, p.err, p.log.Name(), tail(p.log.Name(), 20))
}

// sampleRSS keeps the process's VmHWM until it exits.
func (p *proc) sampleRSS() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		p.readHWM()
		select {
		case <-p.done:
			return
		case <-t.C:
		}
	}
}

// readHWM reads VmHWM from /proc/PID/status (the high-water mark of the program's own
// memory: unlike rusage's maxrss it does not count the parent's image before exec).
func (p *proc) readHWM() {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if v := kb << 10; v > p.hwm.Load() {
				p.hwm.Store(v)
			}
			return
		}
	}
}

// peakRSS returns the process's peak resident set (VmHWM) in bytes: read now if it runs,
// else the last sample.
func (p *proc) peakRSS() int64 {
	if !p.exited() {
		p.readHWM()
	}
	return p.hwm.Load()
}

// cpu returns the user+system CPU time of the exited process.
func (p *proc) cpu() time.Duration {
	if p.cmd.ProcessState == nil {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
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
