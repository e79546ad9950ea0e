package bench

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// SteadyResult is one publisher at one steady rate.
type SteadyResult struct {
	Publisher string  `json:"publisher"`
	Rate      int     `json:"target_rows_per_s"`
	Achieved  float64 `json:"achieved_rows_per_s"` // rows committed per second of load
	Records   int     `json:"records"`             // distinct records measured
	// Latency percentiles from commit (cdc-commit-time) to consumer receipt.
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
	// ToProduce are the p50 and p99 from commit to the record's timestamp, the moment the
	// publisher handed it to its Kafka client (millisecond precision): the part of the
	// latency spent before Kafka.
	ToProduceP50 time.Duration `json:"to_produce_p50_ns"`
	ToProduceP99 time.Duration `json:"to_produce_p99_ns"`
	// PeakRSS is the publisher's VmHWM in bytes; CPU its utime+stime over its life, which
	// published Events records (warm-up included).
	PeakRSS int64         `json:"peak_rss_bytes"`
	CPU     time.Duration `json:"cpu_ns"`
	Events  int64         `json:"events"`
	// WALRate is the server's WAL bytes per second during the load, all databases and
	// sessions: a walsender decodes all of it, the benchmark's rows and anyone else's.
	WALRate float64 `json:"wal_bytes_per_s"`
	// SpillBytes is what the relay's slot spilled to disk while decoding
	// (pg_stat_replication_slots): transactions larger than logical_decoding_work_mem,
	// anyone's.
	SpillBytes int64 `json:"spill_bytes"`
	// Machine is what the machine did besides the benchmark during the measured part.
	Machine *MachineState `json:"machine,omitempty"`
	// BatchesPerRecord is the record batches the consumer fetched per record it read, warm-up
	// included (batchCounter): a produce request appends one batch per partition it carries.
	BatchesPerRecord float64 `json:"batches_per_record,omitempty"`

	// Runs are every run's figures when the rate ran more than once (SteadyRepeats), in the
	// order run; the fields above are then the medians (Latencies, Records and Events all runs').
	Runs []SteadyRun `json:"runs,omitempty"`

	Latencies []time.Duration `json:"-"` // sorted
}

// SteadyRun is one run of a publisher at a steady rate, when it ran several times.
type SteadyRun struct {
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	CPUPer10k float64       `json:"cpu_s_per_10k"`
	Achieved  float64       `json:"achieved_rows_per_s"`
	Machine   *MachineState `json:"machine,omitempty"`
}

// mergeSteady makes one result of a publisher's runs at one rate: each figure the median of
// the runs', the latencies all of them, the machine the busiest run's.
func mergeSteady(rs []SteadyResult) SteadyResult {
	if len(rs) == 1 {
		return rs[0]
	}
	med := func(f func(SteadyResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	dur := func(f func(SteadyResult) time.Duration) time.Duration {
		return time.Duration(med(func(r SteadyResult) float64 { return float64(f(r)) }))
	}
	out := rs[0]
	out.P50 = dur(func(r SteadyResult) time.Duration { return r.P50 })
	out.P90 = dur(func(r SteadyResult) time.Duration { return r.P90 })
	out.P99 = dur(func(r SteadyResult) time.Duration { return r.P99 })
	out.Max = dur(func(r SteadyResult) time.Duration { return r.Max })
	out.ToProduceP50 = dur(func(r SteadyResult) time.Duration { return r.ToProduceP50 })
	out.ToProduceP99 = dur(func(r SteadyResult) time.Duration { return r.ToProduceP99 })
	out.Achieved = med(func(r SteadyResult) float64 { return r.Achieved })
	out.WALRate = med(func(r SteadyResult) float64 { return r.WALRate })
	out.BatchesPerRecord = med(func(r SteadyResult) float64 { return r.BatchesPerRecord })
	// CPU per event is the median run's; CPU and Events are scaled to all runs' events.
	per := med(func(r SteadyResult) float64 { return cpuPer10k(r.CPU, r.Events) })
	out.Records, out.Events, out.PeakRSS, out.SpillBytes, out.Latencies = 0, 0, 0, 0, nil
	var machines []*MachineState
	for _, r := range rs {
		out.Records += r.Records
		out.Events += r.Events
		out.PeakRSS = max(out.PeakRSS, r.PeakRSS)
		out.SpillBytes += r.SpillBytes
		out.Latencies = append(out.Latencies, r.Latencies...)
		machines = append(machines, r.Machine)
		out.Runs = append(out.Runs, SteadyRun{P50: r.P50, P99: r.P99, CPUPer10k: cpuPer10k(r.CPU, r.Events), Achieved: r.Achieved, Machine: r.Machine})
	}
	out.CPU = time.Duration(per / 10_000 * float64(out.Events) * float64(time.Second))
	out.Machine = worst(machines)
	slices.Sort(out.Latencies)
	return out
}

// brokerPer10k is the Kafka broker's CPU seconds per 10,000 rows committed during the measured
// part (its cores then ÷ the rows per second), or -1 when the broker is not on this host.
func brokerPer10k(s SteadyResult) float64 {
	if s.Machine == nil || s.Machine.BrokerCores <= 0 || s.Achieved <= 0 {
		return -1
	}
	return s.Machine.BrokerCores / s.Achieved * 10_000
}

// CPUPer10k is the publisher's CPU seconds per 10,000 events.
func cpuPer10k(cpu time.Duration, events int64) float64 {
	if events == 0 {
		return 0
	}
	return cpu.Seconds() / float64(events) * 10_000
}

// slug makes a publisher name usable in table, slot and topic names.
func slug(s string) string {
	return strings.Trim(nonName.ReplaceAllString(strings.ToLower(s), "_"), "_")
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// steady runs pub against single-row transactions at rate for the configured duration,
// after cfg.Warmup of the same load that is not measured.
func (e *env) steady(ctx context.Context, pub Publisher, rate int) (SteadyResult, error) {
	if pub.Name == RawProducer {
		return e.rawSteady(ctx, rate)
	}
	res := SteadyResult{Publisher: pub.Name, Rate: rate}
	phase := fmt.Sprintf("steady %s at %d rows/s", pub.Name, rate)
	defer e.cleanupTo(e.mark())
	f, err := e.newFixture(ctx, fmt.Sprintf("s_%s_%d", slug(pub.Name), rate))
	if err != nil {
		return res, err
	}
	if !pub.Poll && !pub.Debezium {
		if err := e.createRelaySlot(ctx, f, f.base); err != nil {
			return res, err
		}
	}
	if pub.Debezium {
		e.dropAtCleanup(f, f.base)
	}
	cons, err := e.consume(f.topic, pub)
	if err != nil {
		return res, err
	}
	defer cons.close()
	e.progress("%s: starting %s", phase, pub.Name)
	p, err := e.launch(ctx, pub, f, f.base, "", e.logName("steady-"+slug(pub.Name)+"-"+fmt.Sprint(rate)))
	if err != nil {
		return res, err
	}
	defer func() { _ = p.finish() }()

	// The publisher is connected and one record went through end to end.
	if _, err := e.firstRecord(ctx, f, p, cons); err != nil {
		return res, err
	}
	n, elapsed, err := e.steadyPart(ctx, phase, f, p, cons, rate, e.cfg.Duration, &res)
	if err != nil {
		return res, err
	}
	res.PeakRSS = p.peakRSS()
	if !pub.Poll {
		_ = e.pool.QueryRow(ctx, `SELECT coalesce(sum(spill_bytes), 0) FROM pg_stat_replication_slots WHERE slot_name = $1`, f.base).Scan(&res.SpillBytes)
	}
	if err := p.finish(); err != nil {
		return res, err
	}
	res.CPU, res.Events = p.cpu(), cons.records.Load()
	if res.Events > 0 {
		res.BatchesPerRecord = float64(cons.batches.Load()) / float64(res.Events)
	}
	res.PeakRSS = max(res.PeakRSS, p.peakRSS())
	lat, prod, bad := cons.result()
	if bad != nil {
		return res, fmt.Errorf("bench: %s: %w", phase, bad)
	}
	slices.Sort(lat)
	slices.Sort(prod)
	res.ToProduceP50, res.ToProduceP99 = quantile(prod, 0.5), quantile(prod, 0.99)
	res.Latencies = lat
	res.Records = len(lat)
	res.Achieved = float64(n) / elapsed.Seconds()
	res.P50, res.P90, res.P99, res.Max = quantile(lat, 0.50), quantile(lat, 0.90), quantile(lat, 0.99), quantile(lat, 1)
	e.progress("%s: %.0f rows/s achieved, p50 %s p99 %s max %s (commit to produce: p50 %s p99 %s), peak RSS %.1f MB",
		phase, res.Achieved, ms(res.P50), ms(res.P99), ms(res.Max), ms(res.ToProduceP50), ms(res.ToProduceP99), mb(res.PeakRSS))
	return res, nil
}

// steadyPart is a steady phase's measured part, once p runs and a first record went through
// (firstRecord): single-row transactions at rate from the configured writers for the
// configured warm-up, not measured, then for duration with cons measuring only the rows
// written after the warm-up; then a wait (up to the drain timeout) until cons has read them
// all. It sets res's Machine (the machine's state during the load) and WALRate, and returns
// the rows measured and how long writing them took.
func (e *env) steadyPart(ctx context.Context, phase string, f *fixture, p publisherRun, cons *latencyConsumer, rate int, duration time.Duration, res *SteadyResult) (n int64, elapsed time.Duration, err error) {
	var written atomic.Int64
	if e.cfg.Warmup > 0 {
		e.progress("%s: warming up for %s", phase, e.cfg.Warmup)
		if _, err := steadyLoad(ctx, e.pool, f, rate, e.cfg.Warmup, e.cfg.Writers, &written); err != nil {
			return 0, 0, err
		}
	}
	// Every row written so far is committed: later ones have higher ids.
	var last int64
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+f.outbox).Scan(&last); err != nil {
		return 0, 0, err
	}
	cons.measureAfter(last)
	written.Store(0)

	stopTicker := e.tickProgress(phase, func() string {
		return fmt.Sprintf("%d rows written, %d consumed", written.Load(), cons.measured.Load())
	})
	wal0, _ := e.walPosition(ctx)
	mw := e.watchMachine()
	defer mw.stop()
	elapsed, err = steadyLoad(ctx, e.pool, f, rate, duration, e.cfg.Writers, &written)
	if wal1, werr := e.walPosition(ctx); werr == nil && wal0 > 0 {
		res.WALRate = float64(wal1-wal0) / elapsed.Seconds()
	}
	if err != nil {
		stopTicker()
		return 0, elapsed, err
	}
	n = written.Load()
	err = waitUntil(ctx, e.cfg.DrainTimeout, p, fmt.Sprintf("%d records of %s", n, phase), func() (bool, error) {
		return cons.measured.Load() >= n, nil
	})
	stopTicker()
	res.Machine = mw.stop()
	return n, elapsed, err
}

// firstRecord writes one row every 200ms until the consumer has read one of them and returns
// when it was read. Rows committed before the publisher's slot existed never come (Debezium
// makes its slot when its connector starts): they are not its work.
func (e *env) firstRecord(ctx context.Context, f *fixture, p publisherRun, cons *latencyConsumer) (time.Time, error) {
	var ids []int64
	next := time.Now()
	var at time.Time
	err := waitUntil(ctx, 5*time.Minute, p, "the first record", func() (bool, error) {
		for _, id := range ids {
			if cons.has(id) {
				at = time.Now()
				return true, nil
			}
		}
		if time.Now().After(next) {
			id, err := insertOne(ctx, e.pool, f, "warm-up")
			if err != nil {
				return false, err
			}
			ids = append(ids, id)
			next = time.Now().Add(200 * time.Millisecond)
		}
		return false, nil
	})
	return at, err
}

// quantile returns the q-quantile (nearest rank) of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)) + 0.5)
	i = min(max(i-1, 0), len(sorted)-1)
	return sorted[i]
}

// tickProgress prints what() every second under phase until the returned func is called.
func (e *env) tickProgress(phase string, what func() string) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				e.progress("%s: %4.0fs %s", phase, time.Since(start).Seconds(), what())
			}
		}
	}()
	return func() { close(stop); <-done }
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
func mb(b int64) float64        { return float64(b) / (1 << 20) }
