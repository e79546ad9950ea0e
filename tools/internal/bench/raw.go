package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/outbox"
	"github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/sink"
)

// RawProducer labels, in backlog results, the backlog's records produced straight from memory
// by the relay's own producer (sink.New: its settings, acks=all, idempotent, no compression) to
// the same broker: what Kafka and the producer allow with no PostgreSQL, decoding or pipeline
// in front, the other limit of a drain next to pg_recvlogical's. In steady results, the same
// records produced at the rate (rawSteady): the producer's own CPU and latency per event.
const RawProducer = "kafka producer"

// rawProduce builds a record per backlog row, as the relay would (record.NewRecord: key, value,
// the contract's headers), then times producing all n of them to topic until Kafka has
// acknowledged every one. Loading the rows is not timed. CPU is this process's (the benchmark
// runs the producer in-process; its sampling goroutines are included).
func (e *env) rawProduce(ctx context.Context, label string, f *fixture, topic string, n int) (drainRun, error) {
	e.pauseWorkers(Publisher{})
	rows, err := e.pool.Query(ctx, `SELECT id::text, aggregate_id, payload::text, created_at FROM `+f.outbox+` ORDER BY id`)
	if err != nil {
		return drainRun{}, err
	}
	var recs []*kgo.Record
	lsn := pglogrepl.LSN(1 << 32)
	for rows.Next() {
		var id, key, payload string
		var at time.Time
		if err := rows.Scan(&id, &key, &payload, &at); err != nil {
			rows.Close()
			return drainRun{}, err
		}
		lsn += 200
		recs = append(recs, record.NewRecord(outbox.Event{ID: id, Relation: f.outbox, AggregateID: key, Topic: topic,
			Payload: []byte(payload)}, record.NewStamp(lsn, at), nil))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return drainRun{}, err
	}
	if len(recs) != n {
		return drainRun{}, fmt.Errorf("bench: %s: %d rows in %s, want %d", label, len(recs), f.outbox, n)
	}
	s, err := sink.New(sink.Config{Brokers: e.cfg.Brokers, ClientID: "cdc-bench-producer", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return drainRun{}, err
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		return drainRun{}, err
	}
	mw := e.watchMachine()
	defer mw.stop()
	cpu0 := selfCPU()
	var (
		mu    sync.Mutex
		first time.Time
		fail  error
	)
	start := time.Now()
	for _, r := range recs {
		s.Produce(ctx, r, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && fail == nil {
				fail = err
			}
			if first.IsZero() {
				first = time.Now()
			}
		})
	}
	if err := s.Flush(ctx); err != nil {
		return drainRun{}, err
	}
	r := drainRun{elapsed: time.Since(start), cpu: selfCPU() - cpu0, machine: mw.stop()}
	mu.Lock()
	defer mu.Unlock()
	if fail != nil {
		return drainRun{}, fmt.Errorf("bench: %s: %w", label, fail)
	}
	if first.IsZero() {
		return drainRun{}, errors.New("bench: " + label + ": no record acknowledged")
	}
	r.first = first.Sub(start)
	e.progress("%s: %.2fs (%.0f rows/s, first acknowledgement after %.3fs)", label, r.elapsed.Seconds(), float64(n)/r.elapsed.Seconds(), r.first.Seconds())
	return r, nil
}

// selfCPU is this process's utime+stime so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawSteady is RawProducer at a steady rate: the steady load's records (key, value, the
// contract's headers, built with record.NewRecord) produced from memory by the relay's own
// producer settings to the same broker, paced as the steady load's rows are committed (the
// rows due each millisecond at once) on one processor, after Warmup of the same, unmeasured. Its latency is
// from the Produce call to Kafka's acknowledgement, and its CPU this process's while it is
// measured (the benchmark runs the producer in-process and does nothing else meanwhile but
// sample /proc, whose CPU is left out): what
// producing a record per event costs with no PostgreSQL, decoding or pipeline in front, the
// floor under a relay's CPU and latency at that rate.
func (e *env) rawSteady(ctx context.Context, rate int) (SteadyResult, error) {
	res := SteadyResult{Publisher: RawProducer, Rate: rate}
	phase := fmt.Sprintf("steady %s at %d rows/s", RawProducer, rate)
	defer e.cleanupTo(e.mark())
	e.pauseWorkers(Publisher{})
	f, err := e.newFixture(ctx, fmt.Sprintf("s_raw_%d", rate))
	if err != nil {
		return res, err
	}
	s, err := sink.New(sink.Config{Brokers: e.cfg.Brokers, ClientID: "cdc-bench-producer", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return res, err
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		return res, err
	}
	var (
		mu   sync.Mutex
		lat  []time.Duration
		fail error
		id   int64
	)
	// load produces the records due each millisecond for d, and waits for Kafka to
	// acknowledge them all; measure keeps their latencies.
	load := func(d time.Duration, measure bool) (int, time.Duration, error) {
		total := int(float64(rate) * d.Seconds())
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for sent := 0; sent < total; {
			select {
			case <-ctx.Done():
				return sent, time.Since(start), ctx.Err()
			case <-tick.C:
			}
			for due := min(total, int(float64(rate)*time.Since(start).Seconds())); sent < due; sent++ {
				id++
				payload := fmt.Sprintf(`{"items": [{"qty": 2, "sku": "espresso"}], "event": "order.created", "amount": 12.5, "currency": "EUR", "customer": "customer-%d", "order_id": %d}`, id%8, id)
				rec := record.NewRecord(outbox.Event{ID: fmt.Sprint(id), Relation: f.outbox, AggregateID: fmt.Sprintf("order-%d", id), Topic: f.topic,
					Payload: []byte(payload)}, record.NewStamp(pglogrepl.LSN(1<<32+200*id), time.Now()), nil)
				at := time.Now()
				s.Produce(ctx, rec, func(_ *kgo.Record, err error) {
					took := time.Since(at)
					mu.Lock()
					defer mu.Unlock()
					if err != nil && fail == nil {
						fail = err
					}
					if measure {
						lat = append(lat, took)
					}
				})
			}
		}
		elapsed := time.Since(start)
		if err := s.Flush(ctx); err != nil {
			return total, elapsed, err
		}
		mu.Lock()
		defer mu.Unlock()
		return total, elapsed, fail
	}
	// On one processor, as `run` is while it keeps up (cmd/cdc-relay/procs.go): on two, the
	// producer's goroutine hand-overs wake threads, ~1.2× the CPU per record (0.99-1.03
	// against 0.82-0.87 s per 10,000 at 2,000/s, measured minutes apart on a quiet machine).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if e.cfg.Warmup > 0 {
		e.progress("%s: warming up for %s", phase, e.cfg.Warmup)
		if _, _, err := load(e.cfg.Warmup, false); err != nil {
			return res, fmt.Errorf("bench: %s: %w", phase, err)
		}
	}
	mw := e.watchMachine()
	defer mw.stop()
	cpu0 := selfCPU()
	n, elapsed, err := load(e.cfg.Duration, true)
	// Without the machine watch's samples of /proc, which run in this process: ~3 ms of CPU
	// a second (14 ms in 5 s, with ~200 processes), 0.014 s per 10,000 records at 2,000/s.
	res.CPU = selfCPU() - cpu0 - mw.ownCPU()
	res.Machine = mw.stop()
	if err != nil {
		return res, fmt.Errorf("bench: %s: %w", phase, err)
	}
	slices.Sort(lat)
	res.Latencies, res.Records, res.Events = lat, len(lat), int64(n)
	res.Achieved = float64(n) / elapsed.Seconds()
	res.P50, res.P90, res.P99, res.Max = quantile(lat, 0.50), quantile(lat, 0.90), quantile(lat, 0.99), quantile(lat, 1)
	e.progress("%s: %.0f records/s, produce to acknowledgement p50 %s p99 %s, %.3f CPU s per 10k records (without the %s that sampling /proc took)",
		phase, res.Achieved, ms(res.P50), ms(res.P99), cpuPer10k(res.CPU, res.Events), mw.ownCPU().Round(time.Millisecond))
	return res, nil
}
