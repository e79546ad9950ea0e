// Package retry is the relay's one backoff: a wait that starts at Min and doubles per
// attempt up to Max, optionally with jitter, and Until, which retries an operation until it
// works, fails for good or its context ends. Every loop that waits for PostgreSQL or Kafka
// uses it (the stream's reconnects, the poller's cycles, the dead-letter table, the Kafka
// probes, the sink's ping, the startup waits), each with its own bounds and its own log
// line per cycle. It starts no goroutines; a wait ends early when its context ends.
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

// Startup paces the waits for PostgreSQL and Kafka at startup: 1s, 2s, 4s, then 5s.
var Startup = Backoff{Min: time.Second, Max: 5 * time.Second}

// Delay is the wait after the attempt-th consecutive failure (0 for the first).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Min << min(attempt, 16)
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	if b.Jitter {
		d = d/2 + rand.N(d/2+1)
	}
	return d
}

// Until calls op until it returns nil, returns an error that retrying cannot fix (retryable
// false; nil retryable retries every error), or ctx ends. Between attempts it calls onRetry
// (when not nil) with the error and the coming wait, for the caller's log line, then waits
// Delay(attempt). op gets the attempt's number, 0 for the first. Until returns nil once op
// succeeded, else op's last error: check ctx.Err to tell a cancel from a failure.
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
