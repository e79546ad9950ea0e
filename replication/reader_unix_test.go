//go:build unix

package replication

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCaughtUpRead is one message written to a loopback socket and read as a caught-up
// stream reads it; cpu-ns/op is the process's CPU time per read (both ends, kernel included):
//
//	go test -run '^$' -bench CaughtUpRead -benchtime 50000x -count 5 ./replication
func BenchmarkCaughtUpRead(b *testing.B) {
	r, s := caughtUpReader(b)
	m := copyData(b, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dl := time.Now().Add(time.Hour) // the next status update: the same for many reads
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		send(b, s, m)
		if msg, err := r.receive(ctx, dl); msg == nil || err != nil {
			b.Fatalf("got %T, %v", msg, err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // cannot fail for RUSAGE_SELF
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
