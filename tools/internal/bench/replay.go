package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// ReplayResult is one publisher killed -9 in the middle of a steady run and started again.
type ReplayResult struct {
	Publisher string `json:"publisher"`
	Rate      int    `json:"rows_per_s"`
	Rows      int    `json:"rows"` // rows committed from the first record on: what it had to deliver
	// Startup is from starting the publisher (for Debezium: its Kafka Connect JVM, then the
	// connector) to the first record read; Restart the same after the kill, to the first
	// record the new process produced.
	Startup time.Duration `json:"startup_ns"`
	Restart time.Duration `json:"restart_ns"`
	// KilledAfter is from the first record to the kill.
	KilledAfter time.Duration `json:"killed_after_ns"`
	// ReadBeforeKill are the records read before the kill; Duplicates the records of an
	// outbox id read before: what the kill replayed.
	ReadBeforeKill int64 `json:"read_before_kill"`
	Duplicates     int64 `json:"duplicates"`
	// PeakRSS is the publisher's VmHWM before the kill.
	PeakRSS int64 `json:"peak_rss_bytes"`
	// Machine is what the machine did besides the benchmark from the first record on.
	Machine *MachineState `json:"machine,omitempty"`
}

// replay starts pub from nothing while rows are written at cfg.ReplayRate, kills it -9
// cfg.KillAfter after its first record, starts it again at once while the load goes on for
// as long again, and waits for every row committed since its first record: none may be
// missing (the bench fails if one is), and the duplicates are the kill's replay.
func (e *env) replay(ctx context.Context, pub Publisher) (ReplayResult, error) {
	rate := e.cfg.ReplayRate
	res := ReplayResult{Publisher: pub.Name, Rate: rate}
	phase := fmt.Sprintf("kill -9 %s at %d rows/s", pub.Name, rate)
	defer e.cleanupTo(e.mark())
	f, err := e.newFixture(ctx, "k_"+slug(pub.Name))
	if err != nil {
		return res, err
	}
	if pub.Debezium {
		e.dropAtCleanup(f, f.base)
		// A cold start: the worker's JVM starts with the connector, as after a deploy.
		e.mu.Lock()
		w := e.workers[pub.Name]
		e.mu.Unlock()
		if w != nil {
			w.stop()
		}
	} else if err := e.createRelaySlot(ctx, f, f.base); err != nil {
		return res, err
	}
	cons, err := e.consume(f.topic, pub)
	if err != nil {
		return res, err
	}
	defer cons.close()
	e.progress("%s: starting %s", phase, pub.Name)
	t0 := time.Now()
	p, err := e.launch(ctx, pub, f, f.base, "", "replay-"+slug(pub.Name))
	if err != nil {
		return res, err
	}
	defer func() { _ = p.finish() }()
	first, err := e.firstRecord(ctx, f, p, cons)
	if err != nil {
		return res, err
	}
	res.Startup = first.Sub(t0)
	e.progress("%s: first record %.2fs after the start", phase, res.Startup.Seconds())

	// The load from here on: KillAfter before the kill, as long again after it.
	mw := e.watchMachine()
	defer mw.stop()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var written atomic.Int64
	loadErr := make(chan error, 1)
	go func() {
		_, err := steadyLoad(lctx, e.pool, f, rate, 2*e.cfg.KillAfter, e.cfg.Writers, &written)
		loadErr <- err
	}()
	stopTicker := e.tickProgress(phase, func() string {
		return fmt.Sprintf("%d rows written, %d records read (%d duplicates)", written.Load(), cons.records.Load(), cons.seen.Dups())
	})
	defer stopTicker()
	select {
	case <-time.After(time.Until(first.Add(e.cfg.KillAfter))):
	case err := <-loadErr:
		return res, fmt.Errorf("bench: %s: the load ended before the kill: %v", phase, err)
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.PeakRSS = p.peakRSS()
	p.kill9()
	res.KilledAfter = time.Since(first)
	res.ReadBeforeKill = cons.records.Load()
	restart := time.Now()
	cons.firstSince(restart)
	e.progress("%s: killed -9 %.1fs after the first record, %d records read; starting it again", phase, res.KilledAfter.Seconds(), res.ReadBeforeKill)
	if pub.Debezium {
		w := p.(*debeziumRun).w
		if err := w.restart(ctx, e.cfg); err != nil {
			return res, err
		}
	} else {
		np, err := e.launch(ctx, pub, f, f.base, "", "replay-"+slug(pub.Name)+"-restarted")
		if err != nil {
			return res, err
		}
		p = np
	}
	if err := <-loadErr; err != nil {
		return res, err
	}
	// Every row from the first one read on must come: the earlier ones were committed
	// before the publisher's slot existed (Debezium's), or are the warm-up.
	low := cons.lowest()
	var ids []int64
	rows, err := e.pool.Query(ctx, `SELECT id FROM `+f.outbox+` WHERE id >= $1 ORDER BY id`, low)
	if err != nil {
		return res, err
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return res, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return res, err
	}
	res.Rows = len(ids)
	err = waitUntil(ctx, e.cfg.DrainTimeout+5*time.Minute, p, fmt.Sprintf("%d rows after the restart of %s", len(ids), pub.Name), func() (bool, error) {
		return cons.missing(ids) == 0 && cons.sinceMark.Load() > 0, nil
	})
	if err != nil {
		if m := cons.missing(ids); m > 0 {
			return res, fmt.Errorf("bench: %s: %d of %d committed rows never arrived: %w", phase, m, len(ids), err)
		}
		return res, err
	}
	res.Machine = mw.stop()
	res.Restart = time.Unix(0, cons.sinceMark.Load()).Sub(restart)
	res.Duplicates = cons.seen.Dups()
	if err := p.finish(); err != nil {
		return res, err
	}
	e.progress("%s: %d rows, %d duplicates; first record %.2fs after the restart", phase, res.Rows, res.Duplicates, res.Restart.Seconds())
	return res, nil
}
