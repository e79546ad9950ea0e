// Package otlpsink is an in-process OTLP/HTTP trace receiver for tests and the benchmark: it
// decodes the export requests a cdc-relay process sends (OTEL_EXPORTER_OTLP_ENDPOINT set to
// its URL) and keeps their spans, or only counts them.
//
// Contexts and goroutines: Start serves on a goroutine of net/http's on 127.0.0.1 until
// Close; Spans and Count are safe to call from any goroutine at any time.
package otlpsink

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one exported span with the resource of the process that sent it.
type Span struct {
	*tracepb.Span
	Resource *resourcepb.Resource
}

// Receiver is an OTLP/HTTP endpoint (POST /v1/traces, protobuf, optionally gzip).
type Receiver struct {
	srv  *http.Server
	ln   net.Listener
	keep bool

	mu       sync.Mutex
	spans    []Span
	count    int
	requests int
}

// Start listens on a free loopback port. With keep false it only counts spans (the
// benchmark's sink: the decoding cost stays, memory does not grow).
func Start(keep bool) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("otlpsink: listen: %w", err)
	}
	r := &Receiver{ln: ln, keep: keep}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.export)
	r.srv = &http.Server{Handler: mux}
	go func() { _ = r.srv.Serve(ln) }() // ends with ErrServerClosed at Close
	return r, nil
}

// URL is the value for OTEL_EXPORTER_OTLP_ENDPOINT (http://127.0.0.1:PORT).
func (r *Receiver) URL() string { return "http://" + r.ln.Addr().String() }

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer func() { _ = gz.Close() }() // the body is read to its end below
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.requests++
	for _, rs := range ex.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.count += len(ss.GetSpans())
			if r.keep {
				for _, s := range ss.GetSpans() {
					r.spans = append(r.spans, Span{Span: s, Resource: rs.GetResource()})
				}
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out) // a client gone before the answer retries or drops its spans
}

// Spans returns the spans received so far (none unless Start was given keep).
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Count returns the spans and export requests received so far.
func (r *Receiver) Count() (spans, requests int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count, r.requests
}

// Close stops serving.
func (r *Receiver) Close() error { return r.srv.Close() }
