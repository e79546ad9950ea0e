package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// probeTimeout bounds the start's look at each seed broker (probeNotKafka).
const probeTimeout = 3 * time.Second

// probeNotKafka asks each seed broker once, in parallel, whether it speaks Kafka, with the
// producer's options (TLS, SASL). One whose answer is no Kafka response at all (a size field
// far beyond any response's: PostgreSQL's error reply, an HTTP server's) is a --brokers that
// can never work: the start stops with a usage error (exit 2) that names it. A broker that
// does not answer, refuses the connection or fails in any other way is left to the relay,
// which waits for it as it always has. A TLS listener spoken to in plaintext is Kafka: the
// sink says what to set.
func probeNotKafka(ctx context.Context, brokers []string, opts []kgo.Opt) error {
	errs := make([]error, len(brokers))
	var wg sync.WaitGroup
	for i, b := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = probeBroker(ctx, b, opts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return &usageError{err}
	}
	return nil
}

func probeBroker(ctx context.Context, broker string, opts []kgo.Opt) error {
	o := append(append([]kgo.Opt{}, opts...), kgo.SeedBrokers(broker), kgo.WithLogger(quietKafka{}))
	cl, err := kgo.NewClient(o...)
	if err != nil {
		return nil // the sink reports its configuration errors
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return notKafka(broker, cl.Ping(pctx))
}

// notKafka returns the usage error for a Ping error that proves something other than Kafka
// answers at broker, or nil.
func notKafka(broker string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if !strings.Contains(msg, "invalid large response size") || strings.Contains(msg, "tls alert") {
		return nil
	}
	what := "something that is not a Kafka broker"
	switch {
	case strings.Contains(msg, "'HTTP'"):
		what = "an HTTP server"
	case strings.Contains(msg, "invalid large response size 1157627904 "), strings.Contains(msg, "invalid large response size 1392508928 "):
		what = "a PostgreSQL server (by its reply)" // 'E' or 'S' and three zero bytes: an ErrorResponse or an SSL refusal
	}
	return fmt.Errorf("--brokers %s: %s answers there, not Kafka (%v): this never heals by waiting; "+
		"name a Kafka listener (host:port of the broker's advertised.listeners, often port 9092)", broker, what, err)
}

// quietKafka is franz-go's logger for the probe: its failures are the probe's answer.
type quietKafka struct{}

func (quietKafka) Level() kgo.LogLevel              { return kgo.LogLevelNone }
func (quietKafka) Log(kgo.LogLevel, string, ...any) {}
