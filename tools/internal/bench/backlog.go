package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"
)

// RecvLogical labels pg_recvlogical in backlog results.
const RecvLogical = "pg_recvlogical"

// BacklogResult is one publisher draining one backlog: the median of Repeats drains.
type BacklogResult struct {
	TxSize    int    `json:"tx_size"`
	Rows      int    `json:"rows"`
	Publisher string `json:"publisher"`
	// Payload is the size the payloads were written with (0: the small order event, ~150
	// bytes); ValueBytes the record values' total (the payloads' JSON text), and MBps
	// ValueBytes ÷ Elapsed in MiB/s.
	Payload    int     `json:"payload_bytes,omitempty"`
	ValueBytes int64   `json:"value_bytes"`
	MBps       float64 `json:"value_mib_per_s"`
	// FirstRecord is the median time from starting the publisher to the first record on
	// Kafka (0 for pg_recvlogical).
	FirstRecord time.Duration   `json:"first_record_ns"`
	Elapsed     time.Duration   `json:"elapsed_ns"` // median: process start to all rows acknowledged (or received)
	Runs        []time.Duration `json:"runs_ns"`    // every drain, in the order run
	Rate        float64         `json:"rows_per_s"` // Rows / Elapsed
	PeakRSS     int64           `json:"peak_rss_bytes"`
	CPU         time.Duration   `json:"cpu_ns"` // median
	// WalsenderCPU is the median utime+stime of the slot's walsender during the drains
	// (/proc/<pid>/stat); nil for poll, which has none, and when Postgres's processes are
	// not visible from here (another host or pid namespace).
	WalsenderCPU *time.Duration `json:"walsender_cpu_ns,omitempty"`
	// WalsenderRuns is each drain's walsender CPU, in the order of Runs; 0 where that
	// drain's walsender was not seen. Empty when none was.
	WalsenderRuns []time.Duration `json:"walsender_runs_ns,omitempty"`
	// Machine is the busiest of the drains' machine states (MachineState), MachineRuns each
	// drain's, in the order of Runs.
	Machine     *MachineState   `json:"machine,omitempty"`
	MachineRuns []*MachineState `json:"machine_runs,omitempty"`
}

// drainRun is one drain's measurements.
type drainRun struct {
	elapsed time.Duration
	first   time.Duration // start to the first record on Kafka
	rss     int64
	cpu     time.Duration
	walCPU  time.Duration // the walsender's CPU time, if walOK
	walOK   bool
	machine *MachineState
}

// backlog writes cfg.Backlog rows in transactions of txSize with no publisher running, then
// times pg_recvlogical, the raw producer (RawProducer) and each publisher draining them,
// Repeats times each, interleaved (recv, producer, run, poll, poll, recv, producer, run, ...) so that noise from other load on the machine
// falls on all of them alike. Each relay and pg_recvlogical drain has its own slot, made
// before the rows were written; each poll drain finds the rows pending again.
//
// payload > 0 writes payloads of that size; n is the number of rows.
func (e *env) backlog(ctx context.Context, txSize, payload, n int) ([]BacklogResult, error) {
	defer e.cleanupTo(e.mark())
	reps := e.cfg.Repeats
	phase := fmt.Sprintf("backlog %d rows in %d-row transactions", n, txSize)
	label := fmt.Sprintf("b_tx%d", txSize)
	if payload > 0 {
		phase += fmt.Sprintf(", %d-byte payloads", payload)
		label += fmt.Sprintf("_%db", payload)
	}
	f, err := e.newFixture(ctx, label)
	if err != nil {
		return nil, err
	}
	// pg_recvlogical needs the publication even when no run publisher's slot create makes
	// it; those find it made. It must precede the slots: a slot decoding changes from
	// before the publication existed fails with "publication does not exist".
	if err := e.createPublication(ctx, f); err != nil {
		return nil, err
	}
	// The slots exist before the rows are written, so that each keeps the backlog.
	slots := map[string][]string{}
	for k := 0; k < reps; k++ {
		for _, pub := range e.cfg.Publishers {
			if !pub.Poll {
				slot := fmt.Sprintf("%s_%s_%d", f.base, slug(pub.Name), k)
				// Debezium streams an existing slot from its confirmed position when it
				// has no offset of its own.
				create := e.createRelaySlot
				if pub.Debezium {
					create = func(ctx context.Context, _ *fixture, slot string) error { return e.createPlainSlot(ctx, slot) }
				}
				if err := create(ctx, f, slot); err != nil {
					return nil, err
				}
				slots[pub.Name] = append(slots[pub.Name], slot)
			}
		}
		slot := fmt.Sprintf("%s_recv_%d", f.base, k)
		if err := e.createPlainSlot(ctx, slot); err != nil {
			return nil, err
		}
		slots[RecvLogical] = append(slots[RecvLogical], slot)
	}

	e.progress("%s: writing", phase)
	start := time.Now()
	var last atomic.Int64
	err = backlogLoad(ctx, e.pool, f, n, txSize, payload, func(done int) {
		if now := time.Now().UnixNano(); now-last.Load() >= int64(time.Second) || done >= n {
			last.Store(now)
			e.progress("%s: %d/%d rows written", phase, done, n)
		}
	})
	if err != nil {
		return nil, err
	}
	var end string
	if err := e.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		return nil, err
	}
	// The rows were committed with synchronous_commit off, and a walsender sends only WAL
	// that is flushed: wait for the WAL writer here, or the first drain pays for it.
	for {
		var flushed bool
		if err := e.pool.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, end).Scan(&flushed); err != nil {
			return nil, err
		}
		if flushed {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	var values int64
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(sum(octet_length(payload::text)), 0) FROM `+f.outbox).Scan(&values); err != nil {
		return nil, err
	}
	e.progress("%s: written in %.1fs, WAL end %s, %.1f MB of payload", phase, time.Since(start).Seconds(), end, mb(values))

	names := []string{RecvLogical, RawProducer}
	for _, pub := range e.cfg.Publishers {
		names = append(names, pub.Name)
	}
	runs := map[string][]drainRun{}
	for k := 0; k < reps; k++ {
		// Rotate the order each round, so that no publisher always goes first.
		for i := range names {
			name := names[(i+k)%len(names)]
			label := fmt.Sprintf("%s: %s (%d/%d)", phase, name, k+1, reps)
			var r drainRun
			var err error
			switch {
			case name == RecvLogical:
				r, err = e.recvLogical(ctx, label, f.base, slots[name][k], end, n)
			case name == RawProducer:
				topic := fmt.Sprintf("%s.%s.%d", f.topic, slug(name), k)
				if err := e.createTopic(ctx, topic); err != nil {
					return nil, err
				}
				r, err = e.rawProduce(ctx, label, f, topic, n)
			default:
				pub := publisherNamed(e.cfg.Publishers, name)
				slot, topic, target := "", fmt.Sprintf("%s.%s.%d", f.topic, slug(name), k), f
				if pub.Poll {
					// Each poll drain gets its own copy of the backlog, written as the
					// original was: re-marking rows pending would leave dead index entries
					// that only VACUUM removes, and any long transaction on the server
					// stops VACUUM (that is a weakness of polling, but not this test).
					if target, err = e.copyBacklog(ctx, label, f, fmt.Sprintf("%s_%d", slug(name), k)); err != nil {
						return nil, err
					}
				} else {
					slot = slots[name][k]
				}
				if err := e.createTopic(ctx, topic); err != nil {
					return nil, err
				}
				r, err = e.drain(ctx, label, pub, target, slot, topic, n)
				if pub.Poll {
					_, _ = e.pool.Exec(ctx, `DROP TABLE IF EXISTS `+target.outbox)
				}
			}
			if err != nil {
				return nil, err
			}
			runs[name] = append(runs[name], r)
			if s, ok := slots[name]; ok {
				e.dropSlot(ctx, s[k]) // drained: its WAL is no longer needed
			}
		}
	}

	var out []BacklogResult
	for _, name := range names {
		r := summarize(name, txSize, n, runs[name])
		r.Payload, r.ValueBytes = payload, values
		r.MBps = mb(values) / r.Elapsed.Seconds()
		out = append(out, r)
	}
	return out, nil
}

func publisherNamed(pubs []Publisher, name string) Publisher {
	for _, p := range pubs {
		if p.Name == name {
			return p
		}
	}
	return Publisher{}
}

// summarize takes the median drain (and median CPU, median walsender CPU of the drains
// that measured it, peak RSS) of a publisher's runs.
func summarize(name string, txSize, n int, runs []drainRun) BacklogResult {
	r := BacklogResult{TxSize: txSize, Rows: n, Publisher: name}
	var el, cpu, wal, first []time.Duration
	walRuns := make([]time.Duration, len(runs))
	for i, x := range runs {
		r.Runs = append(r.Runs, x.elapsed)
		el, cpu, first = append(el, x.elapsed), append(cpu, x.cpu), append(first, x.first)
		if x.walOK {
			wal = append(wal, x.walCPU)
			walRuns[i] = x.walCPU
		}
		r.PeakRSS = max(r.PeakRSS, x.rss)
		r.MachineRuns = append(r.MachineRuns, x.machine)
	}
	r.Machine = worst(r.MachineRuns)
	slices.Sort(el)
	slices.Sort(cpu)
	slices.Sort(first)
	r.Elapsed, r.CPU, r.FirstRecord = el[len(el)/2], cpu[len(cpu)/2], first[len(first)/2]
	if len(wal) > 0 {
		slices.Sort(wal)
		r.WalsenderCPU = &wal[len(wal)/2]
		r.WalsenderRuns = walRuns
	}
	r.Rate = float64(n) / r.Elapsed.Seconds()
	return r
}

// copyBacklog copies the backlog's outbox table (rows, pending-rows index) for one poll
// drain; the copy is dropped at cleanup if the caller does not drop it first.
func (e *env) copyBacklog(ctx context.Context, label string, f *fixture, suffix string) (*fixture, error) {
	c := *f
	name := f.base + "_" + suffix
	c.outbox = "public." + name
	e.onClose(func(ctx context.Context) { _, _ = e.pool.Exec(ctx, `DROP TABLE IF EXISTS `+c.outbox) })
	e.progress("%s: copying the backlog for it", label)
	_, err := e.pool.Exec(ctx, `CREATE TABLE `+c.outbox+` (LIKE `+f.outbox+` INCLUDING DEFAULTS);
INSERT INTO `+c.outbox+` SELECT * FROM `+f.outbox+` ORDER BY id;
ALTER TABLE `+c.outbox+` ADD PRIMARY KEY (id);
CREATE INDEX `+name+`_pending_idx ON `+c.outbox+` (id) WHERE published_at IS NULL;
ANALYZE `+c.outbox)
	if err != nil {
		return nil, fmt.Errorf("bench: copy the backlog: %w", err)
	}
	return &c, nil
}

// recvLogical times pg_recvlogical streaming the backlog to /dev/null up to end through the
// publication pub, and the CPU time of its walsender until it exits.
func (e *env) recvLogical(ctx context.Context, label string, pub, slot, end string, n int) (drainRun, error) {
	e.pauseWorkers(Publisher{})
	p, err := startProc(RecvLogical, filepath.Join(e.logDir, "backlog-"+slot+".log"), nil, filepath.Join(e.cfg.PGBin, RecvLogical),
		"-d", e.cfg.PGURL, "--slot", slot, "--start", "--no-loop", "--endpos", end,
		"-o", "proto_version=1", "-o", "publication_names="+pub, "-f", "/dev/null")
	if err != nil {
		return drainRun{}, err
	}
	ws := e.watchWalsender(ctx, slot)
	defer ws.stop()
	mw := e.watchMachine()
	defer mw.stop()
	wctx, cancel := context.WithTimeout(ctx, e.cfg.DrainTimeout)
	defer cancel()
	if err := p.wait(wctx); err != nil {
		return drainRun{}, err
	}
	r := drainRun{elapsed: p.Ended().Sub(p.started), rss: p.peakRSS(), cpu: p.CPU(), machine: mw.stop()}
	r.walCPU, r.walOK = ws.stop()
	e.progress("%s: %.2fs (%.0f rows/s)%s", label, r.elapsed.Seconds(), float64(n)/r.elapsed.Seconds(), walsenderNote(r))
	return r, nil
}

// drain starts pub (run or debezium on slot) publishing to topic and times it until Kafka
// holds all n rows of the backlog there; with a slot, it also samples the slot's walsender's
// CPU time until then. An exactly-once publisher's drain ends when a read_committed consumer
// has read all n: its records count once their transaction committed, and the high
// watermarks count the transactions' markers too.
func (e *env) drain(ctx context.Context, label string, pub Publisher, f *fixture, slot, topic string, n int) (drainRun, error) {
	held, what := func() (int64, error) { return e.endOffsets(ctx, topic) }, "acknowledged by Kafka"
	if pub.ExactlyOnce {
		cons, err := e.consume(topic, pub)
		if err != nil {
			return drainRun{}, err
		}
		defer cons.close()
		held, what = func() (int64, error) { return cons.records.Load(), nil }, "read read_committed"
	}
	p, err := e.launch(ctx, pub, f, slot, topic, "backlog-"+f.base+"-"+slug(pub.Name)+"-"+topic)
	if err != nil {
		return drainRun{}, err
	}
	defer func() { _ = p.finish() }()
	var ws *walsenderWatch
	if slot != "" {
		ws = e.watchWalsender(ctx, slot)
		defer ws.stop()
	}
	mw := e.watchMachine()
	defer mw.stop()
	var acked atomic.Int64
	stopTicker := e.tickProgress(label, func() string { return fmt.Sprintf("%d/%d %s", acked.Load(), n, what) })
	var done, first time.Time
	err = waitUntil(ctx, e.cfg.DrainTimeout, p, fmt.Sprintf("%s to drain %d rows", pub.Name, n), func() (bool, error) {
		v, err := held()
		if err != nil {
			return false, nil // a transient metadata error: ask again
		}
		acked.Store(v)
		done = time.Now()
		if v > 0 && first.IsZero() {
			first = done
		}
		return v >= int64(n), nil
	})
	stopTicker()
	if err != nil {
		return drainRun{}, err
	}
	r := drainRun{machine: mw.stop()}
	if ws != nil {
		r.walCPU, r.walOK = ws.stop() // before the publisher stops, and its walsender with it
	}
	rss := p.peakRSS()
	if err := p.finish(); err != nil {
		return drainRun{}, err
	}
	r.elapsed, r.first, r.rss, r.cpu = done.Sub(p.startedAt()), first.Sub(p.startedAt()), max(rss, p.peakRSS()), p.cpu()
	e.progress("%s: %.2fs (%.0f rows/s, first record after %.2fs), peak RSS %.1f MB%s", label, r.elapsed.Seconds(),
		float64(n)/r.elapsed.Seconds(), r.first.Seconds(), mb(r.rss), walsenderNote(r))
	return r, nil
}

// walsenderNote is the progress line's walsender CPU, if measured.
func walsenderNote(r drainRun) string {
	if !r.walOK {
		return ""
	}
	return fmt.Sprintf(", walsender CPU %.2fs (%s busy)", r.walCPU.Seconds(), busy(r.walCPU, r.elapsed))
}
