//go:build unix

package replication

import (
	"context"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/proc"
)

// BenchmarkCaughtUpRead is one message written to a loopback socket and read as a caught-up
// stream reads it; cpu-ns/op is the process's CPU time per read (both ends, kernel included):
//
//	go test -run '^$' -bench CaughtUpRead -benchtime 50000x -count 5 ./replication
func BenchmarkCaughtUpRead(b *testing.B) {
	read := oneRead(b)
	b.ReportAllocs()
	cpu0 := proc.SelfCPU()
	for b.Loop() {
		read()
	}
	b.ReportMetric(float64(proc.SelfCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkDrainRead is a drain of 10 KB messages over loopback, written as fast as the socket
// takes them, read with the usual drain settings (reads of readSize, SO_RCVLOWAT drainLowat)
// and with those of a drain of large messages; cpu-ns/op is the process's CPU time per message
// (both ends, kernel included):
//
//	go test -run '^$' -bench DrainRead -benchtime 20000x -count 5 ./replication
func BenchmarkDrainRead(b *testing.B) {
	for _, bc := range []struct {
		name string
		mean int // the messages' mean size the reader has seen
	}{{"small-settings", 100}, {"large-settings", 10 << 10}} {
		b.Run(bc.name, func(b *testing.B) {
			r, s := caughtUpReader(b)
			r.tcp = tcpConn(r.conn.Conn())
			r.meanMsg = bc.mean
			r.adapt(time.Second)
			if !r.lowat {
				b.Fatal("not draining")
			}
			m := copyData(b, 10<<10)
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := s.Write(m); err != nil {
						return
					}
				}
			}()
			ctx := context.Background()
			b.SetBytes(int64(len(m)))
			cpu0 := proc.SelfCPU()
			for b.Loop() {
				for {
					msg, err := r.receive(ctx, time.Now().Add(time.Hour))
					if err != nil {
						b.Fatal(err)
					}
					if msg != nil {
						break
					}
				}
			}
			b.ReportMetric(float64(proc.SelfCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
