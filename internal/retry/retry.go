// Package retry is the one backoff of every loop that waits for PostgreSQL or Kafka (each with
// its own bounds and log line): Min doubling up to Max, optionally jittered, and Until, which
// retries an operation until it works, fails for good or its context ends. No goroutines.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is Min doubled per attempt, capped at Max (Min = Max is a fixed wait).
type Backoff struct {
	Min, Max time.Duration
	// Jitter draws each wait from the upper half of its step, so that several processes
	// that failed together do not retry in lockstep.
	Jitter bool
}

// Jitter draws a jittered wait's random part, uniform in [0, n). The simulation on virtual time
// (relay/vsim_test.go) sets it, before any test runs, to a function of n alone, so that a
// schedule's waits, and so its trace, are the same at every run of its seed.
var Jitter = rand.N[time.Duration]

// Startup paces the waits for PostgreSQL and Kafka at startup: 1s, 2s, 4s, then 5s.
var Startup = Backoff{Min: time.Second, Max: 5 * time.Second}

// Delay is the wait after the attempt-th consecutive failure (0 for the first).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Min << min(attempt, 16)
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	if b.Jitter {
		d = d/2 + Jitter(d/2+1)
	}
	return d
}

// Until calls op (attempt 0, 1, ...) until it returns nil, an error retrying cannot fix
// (retryable false; nil retries all), or ctx ends, calling onRetry (if set) with the error and
// the wait before each wait. It returns nil or op's last error (ctx.Err tells a cancel apart).
func (b Backoff) Until(ctx context.Context, op func(attempt int) error, retryable func(error) bool, onRetry func(err error, wait time.Duration)) error {
	for attempt := 0; ; attempt++ {
		err := op(attempt)
		if err == nil || ctx.Err() != nil || retryable != nil && !retryable(err) {
			return err
		}
		wait := b.Delay(attempt)
		if onRetry != nil {
			onRetry(err, wait)
		}
		if !Sleep(ctx, wait) {
			return err
		}
	}
}

// Sleep waits d, or until ctx ends; it reports whether the whole wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
