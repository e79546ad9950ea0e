package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyFunc reports nil when the process can do its job, or why not.
type ReadyFunc func(ctx context.Context) error

// readyTimeout bounds one readiness check (a Kafka round trip).
const readyTimeout = 3 * time.Second

// Handler serves /metrics from g, /healthz (200 while the process serves HTTP) and /readyz
// (200 when ready returns nil, 503 with the reason otherwise; a nil ready is always ready).
func Handler(g prometheus.Gatherer, ready ReadyFunc) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			err := ready(ctx)
			cancel()
			if err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// Serve serves g's metrics, /healthz and ready on addr (host:port; port 0 picks a free one,
// logged) until stop, which shuts the server down (in-flight scrapes get a second) and waits.
// A bind failure is an error when explicit (the address was configured); on the default
// address already in use (a second relay on the same host, e.g. a standby) it is a warning and
// nothing is served.
func Serve(addr string, explicit bool, g prometheus.Gatherer, ready ReadyFunc, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if !explicit && errors.Is(err, syscall.EADDRINUSE) {
			log.Warn("metrics disabled: the default address is in use (another relay on this host?); set --metrics-addr", "addr", addr)
			return func() {}, nil
		}
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	log.Info("serving metrics and health", "addr", ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	srv := &http.Server{Handler: Handler(g, ready), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "cause", fmt.Errorf("metrics: serve on %s: %w", ln.Addr(), err))
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			log.Warn("metrics server did not shut down cleanly", "cause", err)
		}
		<-done
	}, nil
}
