package kafkatxn

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkCommit is one Kafka transaction of a slot on the real broker: Begin, n records
// acknowledged, the checkpoint, Commit. Its time is what exactly-once adds per transaction
// interval (DESIGN.md, "No EndAndBeginTransaction"); records/s says what one producer carries.
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s := newRealSlot(b)
			p := s.producer(b)
			cp := Checkpoint{Slot: s.cfg.Slot}
			b.ResetTimer()
			for range b.N {
				cp.Position++
				s.commit(b, p, "k", n, cp)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkReadCheckpoint reads a slot's checkpoint from a topic whose uncompacted tail holds
// an hour of checkpoints (36,000 records: ten Kafka transactions a second), what a start pays
// at worst with the topic configs EnsureCheckpointTopic sets.
func BenchmarkReadCheckpoint(b *testing.B) {
	s := newRealSlot(b)
	p := s.producer(b)
	const tail = 36_000
	if err := p.Begin(); err != nil {
		b.Fatal(err)
	}
	for i := range tail {
		rec, err := p.checkpointRecord(Checkpoint{Slot: fmt.Sprintf("%s_%d", s.cfg.Slot, i%100), Position: 1})
		if err != nil {
			b.Fatal(err)
		}
		p.Produce(ctx(b), rec, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	want := Checkpoint{Slot: s.cfg.Slot, Position: 0x1000}
	if err := p.Commit(ctx(b), want); err != nil {
		b.Fatal(err)
	}
	s.checkpoint(b) // the markers are written
	b.ResetTimer()
	for range b.N {
		got, ok, err := ReadCheckpoint(ctx(b), s.opts, s.cfg.CheckpointTopic, s.cfg.Slot)
		if err != nil || !ok || got != want {
			b.Fatalf("read %+v (found %v, %v), want %+v", got, ok, err, want)
		}
	}
}
