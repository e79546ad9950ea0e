package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cdc-relay/cdc-relay/metrics"
	"github.com/cdc-relay/cdc-relay/poller"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/slotstore"
)

// defaultMetricsAddr is where metrics and health are served unless --metrics-addr says
// otherwise. Loopback only: expose it deliberately (e.g. --metrics-addr :9188). 9187 is
// postgres_exporter's, often deployed next to the relay.
const defaultMetricsAddr = "127.0.0.1:9188"

// version is stamped into cdc_relay_info; set with -ldflags "-X main.version=...".
var version = "dev"

// opsFlags are the operations flags of run (and, for the metrics address, poll).
type opsFlags struct {
	metricsAddr     string
	metricsExplicit bool // --metrics-addr or its twin was given
	warnBytes       int64
	watchInterval   time.Duration
	pgPassword      string // --pg-password-file's content, for the slot watcher (run sets it)
}

func (o *opsFlags) registerMetrics(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-addr", defaultMetricsAddr,
		"serve Prometheus /metrics, /healthz and /readyz on this host:port (empty disables; port 0 picks one and logs it)")
}

func (o *opsFlags) registerWarn(fs *flag.FlagSet) {
	fs.Int64Var(&o.warnBytes, "wal-retained-warn-bytes", 1<<30,
		"warn (and set cdc_relay_slot_retained_wal_above_threshold) when the slot retains more WAL than this (0 disables)")
}

func (o *opsFlags) registerSlot(fs *flag.FlagSet) {
	o.registerWarn(fs)
	fs.DurationVar(&o.watchInterval, "slot-status-interval", 10*time.Second, "how often the slot's lag and retained WAL are read for metrics")
}

func (o *opsFlags) registerPending(fs *flag.FlagSet) {
	fs.DurationVar(&o.watchInterval, "pending-interval", 10*time.Second, "how often the pending rows and the oldest one's age are counted for metrics")
}

// parsed records whether --metrics-addr was given (on the command line or as its twin).
func (o *opsFlags) parsed(fs *flag.FlagSet) error {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "metrics-addr" {
			o.metricsExplicit = true
		}
	})
	if o.warnBytes < 0 || o.watchInterval < 0 {
		return usageErr("--wal-retained-warn-bytes and --slot-status-interval must not be negative")
	}
	return nil
}

// startRun serves the relay's metrics and health and watches its slot (see serve).
func (o *opsFlags) startRun(ctx context.Context, reg *prometheus.Registry, r *relay.Relay, pgURL, slot string, log *slog.Logger) (stop func(), err error) {
	w := &metrics.SlotWatcher{ConnString: pgURL, Password: o.pgPassword, Slot: slot, Interval: o.watchInterval, Metrics: metrics.NewSlot(reg, o.warnBytes), Logger: log}
	return o.serve(ctx, reg, r.Ready, log, w.Run)
}

// startPoll serves the polling publisher's metrics and health and counts its pending rows.
// Ready means the pending rows were counted lately (PostgreSQL answers, the table is readable).
// cfg.Metrics, registered in reg, is the poller's.
func (o *opsFlags) startPoll(ctx context.Context, reg *prometheus.Registry, p *poller.Poller, cfg poller.Config, log *slog.Logger) (stop func(), err error) {
	m := cfg.Metrics
	m.SetSource(func() metrics.PollerSnapshot {
		s := p.Stats()
		return metrics.PollerSnapshot{Published: s.Published.Load(), DeadLettered: s.DeadLettered.Load(),
			BadRows: s.BadRows.Load(), Cycles: s.Cycles.Load(), RolledBack: s.RolledBack.Load()}
	})
	w := &metrics.PendingWatcher{ConnString: cfg.ConnString, Password: cfg.Password, Table: cfg.Table, Columns: cfg.Columns,
		Interval: o.watchInterval, Metrics: m, Logger: log}
	return o.serve(ctx, reg, w.Ready, log, w.Run)
}

// serve runs the watchers and serves reg and ready on the metrics address until stop, which
// ends them all and waits. A bind failure is an error when the address was given; on the
// default address (a second relay on the same host, e.g. a standby) it is a warning and the
// process runs without metrics.
func (o *opsFlags) serve(ctx context.Context, reg *prometheus.Registry, ready metrics.ReadyFunc, log *slog.Logger, watchers ...func(context.Context) error) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() { cancel(); wg.Wait() }
	for _, w := range watchers {
		wg.Go(func() { _ = w(ctx) })
	}
	if o.metricsAddr == "" {
		return stop, nil
	}
	ln, err := metrics.Listen(o.metricsAddr)
	if err != nil {
		if !o.metricsExplicit && errors.Is(err, syscall.EADDRINUSE) {
			log.Warn("metrics disabled: the default address is in use (another relay on this host?); set --metrics-addr", "addr", o.metricsAddr)
			return stop, nil
		}
		stop()
		return nil, err
	}
	log.Info("serving metrics and health", "addr", ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	wg.Go(func() {
		if err := metrics.Serve(ctx, ln, metrics.Handler(reg, ready), log); err != nil {
			log.Error("metrics server stopped", "cause", err)
		}
	})
	return stop, nil
}

// printRetainedCheck adds the retained-WAL threshold line to `slot status`.
func printRetainedCheck(w io.Writer, st slotstore.Status, warn int64) {
	var line string
	switch {
	case warn <= 0:
		line = "not checked (--wal-retained-warn-bytes 0)"
	case st.WALStatus == "lost":
		line = "LOST: the slot is invalidated; see below"
	case st.RetainedWALBytes > warn:
		line = fmt.Sprintf("ABOVE threshold: %d > %d bytes (--wal-retained-warn-bytes): the relay is behind or stopped and PostgreSQL keeps WAL for it", st.RetainedWALBytes, warn)
	default:
		line = fmt.Sprintf("ok: %d <= %d bytes (--wal-retained-warn-bytes)", st.RetainedWALBytes, warn)
	}
	fmt.Fprintf(w, "%-20s %s\n", "retained_wal_check", line)
}
