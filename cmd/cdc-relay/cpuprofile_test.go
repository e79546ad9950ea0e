package main

import (
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CDC_RELAY_CPU_PROFILE makes the process write a CPU profile that pprof reads, also when it
// exits with an error; a path that cannot be created is a usage error naming the variable.
func TestCPUProfileEnv(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cdc-relay")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	cmd := exec.Command(bin, "run") // exits 2: no flags
	cmd.Env = append(os.Environ(), cpuProfileEnv+"="+path)
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitUsage {
		t.Fatalf("exit %d, want %d:\n%s", cmd.ProcessState.ExitCode(), exitUsage, out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A pprof profile is a gzipped protocol buffer that names its sample types.
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not a profile: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || !strings.Contains(string(b), "samples") || !strings.Contains(string(b), "cpu") {
		t.Errorf("%s is not a CPU profile (%d bytes, %v)", path, len(b), err)
	}

	cmd = exec.Command(bin, "run")
	cmd.Env = append(os.Environ(), cpuProfileEnv+"="+filepath.Join(t.TempDir(), "missing", "cpu.pprof"))
	out, _ = cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), cpuProfileEnv) {
		t.Errorf("exit %d, output %q: want %d naming %s", cmd.ProcessState.ExitCode(), out, exitUsage, cpuProfileEnv)
	}
}
