package bench

import (
	"context"
	"sync"
	"time"
)

// publisherRun is one publisher at work on one phase's fixture: a cdc-relay process, or a
// connector on a debezium publisher's Kafka Connect worker.
type publisherRun interface {
	// failed returns an error once the publisher has stopped by itself (or its task failed).
	failed() error
	// finish stops the publisher (SIGTERM; for Debezium, deletes the connector) and returns
	// an error if it did not stop cleanly.
	finish() error
	// peakRSS is the process's VmHWM (for Debezium: the worker JVM's, over its life).
	peakRSS() int64
	// cpu is the CPU time the publisher used for this phase, valid after finish.
	cpu() time.Duration
	// started is when the process (for Debezium: the connector) was started.
	startedAt() time.Time
	// kill9 kills the publisher's process with SIGKILL.
	kill9()
}

// launch starts pub on the fixture: run on slot, poll on f's table, debezium with a connector
// of its own on slot (created by Debezium unless it exists). topic, when set, receives every
// record instead of the rows' topic column.
func (e *env) launch(ctx context.Context, pub Publisher, f *fixture, slot, topic, logName string) (publisherRun, error) {
	e.pauseWorkers(pub)
	if pub.ExactlyOnce {
		if err := e.ensureCheckpointTopic(ctx, f); err != nil {
			return nil, err
		}
	}
	if !pub.Debezium {
		p, err := e.startPublisher(pub, f, slot, topic, logName)
		if err != nil {
			return nil, err
		}
		return relayRun{p}, nil
	}
	w, err := e.worker(ctx, pub)
	if err != nil {
		return nil, err
	}
	cfg, err := connectorConfig(e.cfg.PGURL, pub, f, slot, topic)
	if err != nil {
		return nil, err
	}
	r := &debeziumRun{w: w, name: slot, cpu0: w.cpu(), started: time.Now()}
	if err := w.add(ctx, slot, cfg); err != nil {
		return nil, err
	}
	return r, nil
}

type relayRun struct{ p *proc }

func (r relayRun) failed() error        { return r.p.failed() }
func (r relayRun) finish() error        { return r.p.stop(30 * time.Second) }
func (r relayRun) peakRSS() int64       { return r.p.peakRSS() }
func (r relayRun) cpu() time.Duration   { return r.p.CPU() }
func (r relayRun) startedAt() time.Time { return r.p.started }
func (r relayRun) kill9() {
	if !r.p.Exited() {
		r.p.Kill()
	}
}

// debeziumRun is a connector on a worker; its CPU is the JVM's while the connector ran.
type debeziumRun struct {
	w       *connectWorker
	name    string
	cpu0    time.Duration
	used    time.Duration
	started time.Time

	mu      sync.Mutex
	checked time.Time // the last time the connector's status was asked for
	once    sync.Once
}

func (r *debeziumRun) failed() error {
	if err := r.w.p.failed(); err != nil {
		return err
	}
	// The REST status once a second: the callers poll every 10 ms.
	r.mu.Lock()
	due := time.Since(r.checked) >= time.Second
	if due {
		r.checked = time.Now()
	}
	r.mu.Unlock()
	if !due {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.w.failedTask(ctx, r.name)
}

func (r *debeziumRun) finish() error {
	r.once.Do(func() {
		if c := r.w.cpu(); c > r.cpu0 {
			r.used = c - r.cpu0
		}
		r.w.remove(r.name)
	})
	return r.w.p.failed()
}

func (r *debeziumRun) peakRSS() int64       { return r.w.p.peakRSS() }
func (r *debeziumRun) cpu() time.Duration   { return r.used }
func (r *debeziumRun) startedAt() time.Time { return r.started }
func (r *debeziumRun) kill9()               { r.w.kill() }
