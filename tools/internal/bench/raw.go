package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/sink"
)

// RawProducer labels, in backlog results, the backlog's records produced straight from memory
// by the relay's own producer (sink.New: its settings, acks=all, idempotent, no compression) to
// the same broker: what Kafka and the producer allow with no PostgreSQL, decoding or pipeline
// in front, the other limit of a drain next to pg_recvlogical's.
const RawProducer = "kafka producer"

// rawProduce builds a record per backlog row, as the relay would (sink.NewRecord: key, value,
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
		recs = append(recs, sink.NewRecord(sink.Event{ID: id, Table: f.outbox, AggregateID: key, Topic: topic,
			Payload: []byte(payload), Stamp: sink.NewStamp(lsn, at)}))
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
