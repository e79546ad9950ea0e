package faults

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testenv"
)

// writer is testenv's Writer on the fixture's table and topic.
type writer struct{ *testenv.Writer }

func newWriter(e *testenv.RelayEnv) *writer {
	return &writer{testenv.NewWriter(e.F.Pool, e.F.Table, e.F.Topic)}
}

func (w *writer) run(ctx context.Context, interval time.Duration) (wait func()) {
	return w.Run(ctx, interval)
}
func (w *writer) committed() []int64                          { return w.Committed() }
func (w *writer) verify(t *testing.T, recs []*kgo.Record) int { return w.Verify(t, recs) }

// hasAll reports whether every id in want has arrived.
func hasAll(want []int64) func([]*kgo.Record) bool { return testenv.HasAll(want) }
