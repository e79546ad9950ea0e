package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names a file that receives a CPU profile (pprof) of the whole process, from
// its start until it exits by itself or on SIGTERM (not on SIGKILL): for the benchmark
// (`cdc-bench --profile`) and anyone who needs to see where a relay's CPU goes. Profiling
// costs a few percent of CPU while it runs.
const cpuProfileEnv = "CDC_RELAY_CPU_PROFILE"

// startCPUProfile starts profiling into path and returns the function that stops it and
// closes the file ("" profiles nothing).
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
