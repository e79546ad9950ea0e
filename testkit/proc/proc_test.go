package proc

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestExitCodeOutputAndEnv(t *testing.T) {
	var out bytes.Buffer
	p, err := Start(&out, []string{"PROC_TEST_WORD=hello"}, "sh", "-c", `echo "$PROC_TEST_WORD"; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.ExitCode() != 3 || p.Signal() != 0 || p.Err() == nil {
		t.Errorf("exit %d, signal %v, err %v; want 3, 0, an error", p.ExitCode(), p.Signal(), p.Err())
	}
	if out.String() != "hello\n" {
		t.Errorf("output %q, want the env var's value", out.String())
	}
}

func TestKillReportsTheSignal(t *testing.T) {
	p, err := Start(nil, nil, "sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if !p.Exited() || p.Signal() != syscall.SIGKILL || p.ExitCode() != -1 {
		t.Errorf("exited %v, signal %v, exit %d; want SIGKILL, -1", p.Exited(), p.Signal(), p.ExitCode())
	}
}

func TestStopKillsAProcessThatIgnoresTERM(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := Start(w, nil, "sh", "-c", `trap "" TERM; echo ready; while :; do sleep 0.05; done`)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(r).ReadString('\n'); line != "ready\n" { // the trap is set before "ready"
		t.Fatalf("read %q, %v", line, err)
	}
	if err := p.Stop(200 * time.Millisecond); !errors.Is(err, ErrIgnoredTerm) {
		t.Errorf("Stop = %v, want ErrIgnoredTerm", err)
	}
	if p.Signal() != syscall.SIGKILL {
		t.Errorf("signal %v, want SIGKILL", p.Signal())
	}
}

func TestPeakRSS(t *testing.T) {
	rss, err := PeakRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Errorf("PeakRSS(self) = %d, %v; want at least 1 MiB", rss, err)
	}
}
