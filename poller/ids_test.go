package poller

import (
	"context"
	"strconv"
	"testing"
)

// PublishRows publishes the listed rows that are pending, in batches, and marks them; a listed
// row another publisher marked is not sent again, and unlisted pending rows stay pending.
func TestPublishRowsPublishesOnlyListedPendingRows(t *testing.T) {
	f := newFake(t, "events", "dlq")
	p, fx := newTestPoller(t, f, 30) // ids 1..30, batch 10
	ctx := context.Background()
	// Rows 1..5 were marked by the old poller.
	if _, err := fx.Pool.Exec(ctx, `UPDATE `+fx.Table+` SET published_at = now() WHERE id <= 5`); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 1; i <= 24; i++ {
		ids = append(ids, strconv.Itoa(i))
	}
	n, err := p.PublishRows(ctx, ids)
	if err != nil || n != 19 {
		t.Fatalf("PublishRows: %d rows, %v; want 19 (6..24)", n, err)
	}
	if got := p.Stats().Published.Load(); got != 19 {
		t.Errorf("Stats.Published = %d, want 19", got)
	}
	if got := pendingRows(t, fx); got != 6 {
		t.Errorf("%d rows pending, want 6 (25..30, not listed)", got)
	}
	if n, err := p.PublishRows(ctx, ids); err != nil || n != 0 {
		t.Errorf("second PublishRows: %d rows, %v; want none", n, err)
	}
}
