package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Run runs the suite and writes table.md, report.json and latency-cdf.svg into cfg.OutDir.
// It returns the report even when a phase failed (with the results up to then) together
// with the error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg, leftOut := prepareDebezium(ctx, cfg)
	rep := &Report{Started: time.Now(), Machine: machine(), Command: cfg.Command, LoadAvg: [2]float64{loadAvg(), 0}, Config: ReportConfig{
		Duration: cfg.Duration, Rates: cfg.Rates, Backlog: cfg.Backlog, TxSizes: cfg.TxSizes, Repeats: cfg.Repeats,
		Writers: cfg.Writers, Partitions: cfg.Partitions, Warmup: cfg.Warmup, LargeRows: max(cfg.LargeRows, 0), LargePayload: cfg.LargePayload,
		ReplayRate: cfg.ReplayRate, KillAfter: cfg.KillAfter,
	}, LeftOut: leftOut}
	if cfg.SteadyRepeats > 1 {
		rep.Config.SteadyRepeats = cfg.SteadyRepeats
	}
	for _, p := range cfg.Publishers {
		if p.Debezium {
			rep.Config.Debezium = append(rep.Config.Debezium, DebeziumConfig{Publisher: p.Name, Settings: p.Args})
		}
	}
	if cfg.SkipSteady {
		rep.Config.Rates = nil
	}
	if cfg.SkipBacklog {
		rep.Config.TxSizes, rep.Config.LargeRows = nil, 0
	}
	if cfg.SkipReplay {
		rep.Config.ReplayRate = 0
	}
	e, done, err := openEnv(ctx, &cfg, "tables, slots, publications and topics")
	if err != nil {
		return nil, err
	}
	defer done()
	rep.Services, rep.Prefix = e.serverInfo(ctx), e.prefix

	err = e.suite(ctx, rep)
	rep.Elapsed = time.Since(rep.Started)
	rep.LoadAvg[1] = loadAvg()
	rep.evaluate()
	if werr := rep.write(cfg.OutDir); werr != nil {
		err = errors.Join(err, werr)
	}
	return rep, err
}

func (e *env) suite(ctx context.Context, rep *Report) error {
	// First, so that Debezium's start is a cold one; its restarted worker then serves the
	// other phases.
	if !e.cfg.SkipReplay {
		for _, pub := range e.cfg.Publishers {
			if pub.Poll {
				continue
			}
			r, err := e.replay(ctx, pub)
			if err != nil {
				return fmt.Errorf("kill -9 %s: %w", pub.Name, err)
			}
			rep.Replay = append(rep.Replay, r)
		}
	}
	if !e.cfg.SkipSteady {
		// The publishers, and beside them RawProducer (rawSteady): the Kafka client's own cost
		// and latency at the rate, the floor under a relay's.
		pubs := append(slices.Clone(e.cfg.Publishers), Publisher{Name: RawProducer})
		for _, rate := range e.cfg.Rates {
			runs := make([][]SteadyResult, len(pubs))
			for k := 0; k < e.cfg.SteadyRepeats; k++ {
				// Rotate the order each round, so that no publisher always goes first.
				for i := range pubs {
					j := (i + k) % len(pubs)
					r, err := e.steady(ctx, pubs[j], rate)
					if err != nil {
						return fmt.Errorf("steady %s at %d rows/s: %w", pubs[j].Name, rate, err)
					}
					runs[j] = append(runs[j], r)
				}
			}
			for _, rs := range runs {
				rep.Steady = append(rep.Steady, mergeSteady(rs))
			}
		}
	}
	if !e.cfg.SkipBacklog {
		for _, size := range e.cfg.TxSizes {
			rs, err := e.backlog(ctx, size, 0, e.cfg.Backlog)
			if err != nil {
				return fmt.Errorf("backlog in %d-row transactions: %w", size, err)
			}
			rep.Backlog = append(rep.Backlog, rs...)
		}
		if e.cfg.LargeRows > 0 {
			rs, err := e.backlog(ctx, 1, e.cfg.LargePayload, e.cfg.LargeRows)
			if err != nil {
				return fmt.Errorf("backlog of %d-byte payloads: %w", e.cfg.LargePayload, err)
			}
			rep.Backlog = append(rep.Backlog, rs...)
		}
	}
	return nil
}

// runReport runs a command that writes one report (shards, values): run, given the env
// opened on cfg (openEnv, what naming what it removes at the end), fills in rep, which is
// then written into cfg.OutDir as name.json and name.md, also after a failure part-way.
func runReport[R interface{ Markdown() string }](ctx context.Context, cfg Config, what, name string, rep R, run func(*env) error) (R, error) {
	e, done, err := openEnv(ctx, &cfg, what)
	if err != nil {
		var none R
		return none, err
	}
	defer done()
	err = run(e)
	if werr := writeReport(cfg.OutDir, name, rep); werr != nil {
		err = errors.Join(err, werr)
	}
	return rep, err
}

// writeReport stores r in dir as name.json and name.md (its Markdown).
func writeReport(dir, name string, r interface{ Markdown() string }) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".json"), append(js, '\n'), 0o644)
	}
	return errors.Join(err, os.WriteFile(filepath.Join(dir, name+".md"), []byte(r.Markdown()), 0o644))
}

// write stores the report files in dir.
func (r *Report) write(dir string) error {
	var errs []error
	errs = append(errs, os.WriteFile(filepath.Join(dir, "table.md"), []byte(r.Markdown()), 0o644))
	js, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n'), 0o644)
	}
	errs = append(errs, err)
	if len(r.Steady) > 0 {
		for name, png := range map[string]bool{"latency-cdf.svg": false, "latency-cdf.png": true} {
			var buf bytes.Buffer
			err := WriteCDF(&buf, r.Steady, png)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// openEnv makes cfg.OutDir and its logs/, builds cdc-relay when cfg names no binary, opens
// the run's env and marks what of an earlier run of its prefix it finds (findOurs). done closes the env, removing the tables,
// slots, publications and topics (and what) it made, then the built binary.
func openEnv(ctx context.Context, cfg *Config, what string) (e *env, done func(), err error) {
	if err := os.MkdirAll(filepath.Join(cfg.OutDir, "logs"), 0o755); err != nil {
		return nil, nil, err
	}
	var dir string
	removeDir := func() {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
	if cfg.RelayBin == "" {
		if dir, err = os.MkdirTemp("", "cdc-bench"); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(cfg.Progress, "cdc-bench: building cdc-relay\n")
		if cfg.RelayBin, err = BuildRelay(ctx, dir); err != nil {
			removeDir()
			return nil, nil, err
		}
	}
	if e, err = newEnv(ctx, *cfg, cfg.RelayBin); err != nil {
		removeDir()
		return nil, nil, err
	}
	e.ours = e.findOurs(ctx)
	return e, func() {
		e.progress("cleaning up (%s named %s_*)", what, e.prefix)
		e.close()
		removeDir()
	}, nil
}
