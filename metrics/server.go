package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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

// Listen binds addr (host:port; port 0 picks a free one). The caller passes the listener to
// Serve; binding first lets it fail fast and log the real address.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves h on ln until ctx ends, then shuts the server down (in-flight scrapes get a
// second) and returns nil.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("metrics: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && log != nil {
		log.Warn("metrics server did not shut down cleanly", "cause", err)
	}
	return nil
}
