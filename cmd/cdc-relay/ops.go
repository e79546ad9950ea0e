package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
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

// parse parses a service command's flags (run's, poll's) and their environment twins, then
// checks the connection flags (validate) and its own.
func (o *opsFlags) parse(fs *flag.FlagSet, args []string, validate func() error) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := validate(); err != nil {
		return err
	}
	return o.parsed(fs)
}

// parsed records whether --metrics-addr was given (on the command line or as its twin).
func (o *opsFlags) parsed(fs *flag.FlagSet) error {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "metrics-addr" {
			o.metricsExplicit = true
		}
	})
	if err := checkMetricsAddr(o.metricsAddr); err != nil {
		return &usageError{err}
	}
	if o.warnBytes < 0 || o.watchInterval < 0 {
		return usageErr("--wal-retained-warn-bytes and --slot-status-interval must not be negative")
	}
	return nil
}

// startRun serves the relay's metrics and health and watches its slot (see serve).
func (o *opsFlags) startRun(ctx context.Context, reg *prometheus.Registry, r *relay.Relay, c *common, log *slog.Logger) (stop func(), err error) {
	w := &slotstore.Watcher{Connect: func(ctx context.Context) (*pgx.Conn, error) { return connectPG(ctx, c) }, Slot: c.slot,
		Interval: o.watchInterval, WarnBytes: o.warnBytes, Observer: metrics.NewSlot(reg, o.warnBytes), Logger: log}
	return o.serve(ctx, reg, r.Ready, log, func(ctx context.Context) { _ = w.Run(ctx) })
}

// startPoll serves the polling publisher's metrics and health and counts its pending rows.
// Ready means the pending rows were counted lately (PostgreSQL answers, the table is readable).
// cfg.Metrics, registered in reg, is the poller's.
func (o *opsFlags) startPoll(ctx context.Context, reg *prometheus.Registry, p *poller.Poller, cfg poller.Config, log *slog.Logger) (stop func(), err error) {
	cfg.Metrics.SetSource(func() metrics.PollerSnapshot {
		s := p.Stats()
		return metrics.PollerSnapshot{Published: s.Published.Load(), DeadLettered: s.DeadLettered.Load(),
			BadRows: s.BadRows.Load(), Cycles: s.Cycles.Load(), RolledBack: s.RolledBack.Load()}
	})
	return o.serve(ctx, reg, p.PendingReady, log, func(ctx context.Context) { p.WatchPending(ctx, o.watchInterval) })
}

// serve runs watch and serves reg and ready on the metrics address (metrics.Serve) until
// stop, which ends both and waits.
func (o *opsFlags) serve(ctx context.Context, reg *prometheus.Registry, ready metrics.ReadyFunc, log *slog.Logger, watch func(context.Context)) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); watch(ctx) }()
	stopServer := func() {}
	if o.metricsAddr != "" {
		if stopServer, err = metrics.Serve(o.metricsAddr, o.metricsExplicit, reg, ready, log); err != nil {
			// An address in use or not this host's: the configuration's to fix (exit 2).
			err = usageErr("--metrics-addr %s: %w: choose a free port, or empty to serve no metrics", o.metricsAddr, err)
		}
	}
	stop = func() { cancel(); <-done; stopServer() }
	if err != nil {
		cancel()
		<-done
		return nil, err
	}
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
	case st.RetainsMoreThan(warn):
		line = fmt.Sprintf("ABOVE threshold: %d > %d bytes (--wal-retained-warn-bytes): the relay is behind or stopped and PostgreSQL keeps WAL for it", st.RetainedWALBytes, warn)
	default:
		line = fmt.Sprintf("ok: %d <= %d bytes (--wal-retained-warn-bytes)", st.RetainedWALBytes, warn)
	}
	fmt.Fprintf(w, "%-20s %s\n", "retained_wal_check", line)
}
