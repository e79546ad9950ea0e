//go:build unix

package proc

import (
	"syscall"
	"time"
)

// SelfCPU returns the CPU time this process has used so far, user and system, every thread:
// what a benchmark reports as cpu-ns/op.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // cannot fail for RUSAGE_SELF
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
