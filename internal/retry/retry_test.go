package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The shapes the loops had before they shared this helper: the startup waits 1s, 2s, 4s, 5s...;
// the dead-letter table 250ms doubling to 30s; a fixed wait when Min = Max.
func TestDelayDoublesUpToMax(t *testing.T) {
	for _, c := range []struct {
		b    Backoff
		want []time.Duration
	}{
		{Startup, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		{Backoff{Min: 250 * time.Millisecond, Max: 30 * time.Second}, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond,
			time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}},
		{Backoff{Min: 250 * time.Millisecond, Max: 250 * time.Millisecond}, []time.Duration{250 * time.Millisecond, 250 * time.Millisecond}},
	} {
		for n, want := range c.want {
			if got := c.b.Delay(n); got != want {
				t.Errorf("%+v.Delay(%d) = %s, want %s", c.b, n, got, want)
			}
		}
		if got := c.b.Delay(1 << 20); got != c.b.Max {
			t.Errorf("%+v.Delay(huge) = %s, want the bound %s", c.b, got, c.b.Max)
		}
	}
}

func TestJitterStaysInTheUpperHalf(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: true}
	seen := map[time.Duration]bool{}
	for attempt := range 40 {
		d := b.Delay(attempt)
		ceil := min(b.Min<<min(attempt, 16), b.Max)
		if d < ceil/2 || d > ceil {
			t.Errorf("attempt %d: %s outside [%s, %s]", attempt, d, ceil/2, ceil)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("%d distinct waits in 40 attempts: no jitter", len(seen))
	}
}

func TestUntil(t *testing.T) {
	fast := Backoff{Min: time.Millisecond, Max: time.Millisecond}
	errDown, errBad := errors.New("down"), errors.New("bad credentials")
	retryable := func(err error) bool { return err != errBad }

	// Retries what can be retried, says so before each wait, and returns nil once op works.
	var waits []time.Duration
	var attempts []int
	err := fast.Until(context.Background(), func(attempt int) error {
		attempts = append(attempts, attempt)
		if attempt < 2 {
			return errDown
		}
		return nil
	}, retryable, func(err error, wait time.Duration) {
		if err != errDown {
			t.Errorf("onRetry got %v", err)
		}
		waits = append(waits, wait)
	})
	if err != nil || len(attempts) != 3 || attempts[2] != 2 || len(waits) != 2 {
		t.Errorf("Until = %v after attempts %v and waits %v; want nil after 0 1 2 and two waits", err, attempts, waits)
	}

	// Stops at once for what retrying cannot fix.
	n := 0
	err = fast.Until(context.Background(), func(int) error { n++; return errBad }, retryable, nil)
	if err != errBad || n != 1 {
		t.Errorf("Until = %v after %d attempts, want %v after 1", err, n, errBad)
	}

	// Stops when ctx ends during a wait, with op's last error.
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	err = Backoff{Min: time.Hour, Max: time.Hour}.Until(ctx, func(int) error { return errDown }, nil, func(error, time.Duration) { cancel() })
	if err != errDown || ctx.Err() == nil || time.Since(start) > 10*time.Second {
		t.Errorf("Until = %v (ctx %v) after %s, want %v at once after the cancel", err, ctx.Err(), time.Since(start), errDown)
	}
}
