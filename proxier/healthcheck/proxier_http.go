package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// shutdownTimeout bounds how long Run waits for in-flight probes when its
// context ends.
const shutdownTimeout = 5 * time.Second

// healthResponse is the /healthz and /livez body, with kube-proxy's field
// names. LastUpdated is the current time while healthy (kube-proxy keeps
// that for compatibility with old releases) and the last successful sync
// otherwise.
type healthResponse struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
	Healthy      bool      `json:"healthy"`
}

// Handler returns the HTTP handler serving /healthz and /livez.
func (s *ProxierHealthServer) Handler() http.Handler {
	var healthzCodes, livezCodes *prometheus.CounterVec
	if s.metrics != nil {
		healthzCodes, livezCodes = s.metrics.ProxyHealthzTotal, s.metrics.ProxyLivezTotal
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		eligible := s.NodeEligible()
		s.serveHealth(w, &eligible, healthzCodes)
	})
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		s.serveHealth(w, nil, livezCodes)
	})
	return mux
}

// serveHealth writes one health answer. eligible is nil for /livez, which
// ignores the node.
func (s *ProxierHealthServer) serveHealth(w http.ResponseWriter, eligible *bool, codes *prometheus.CounterVec) {
	healthy, lastUpdated, now := s.health()
	resp := healthResponse{LastUpdated: lastUpdated, CurrentTime: now, NodeEligible: eligible, Healthy: healthy}
	code := http.StatusOK
	if !healthy || (eligible != nil && !*eligible) {
		code = http.StatusServiceUnavailable
	} else {
		resp.LastUpdated = now
	}
	if codes != nil {
		codes.WithLabelValues(strconv.Itoa(code)).Inc()
	}
	writeJSON(w, code, resp)
}

// writeJSON writes body as JSON with the headers kube-proxy sends.
func writeJSON(w http.ResponseWriter, code int, body any) {
	out, err := json.Marshal(body)
	if err != nil { // only plain structs are passed; cannot happen
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(out)
}

// Run serves /healthz and /livez on addr until ctx is done, then shuts the
// server down gracefully. It returns nil after a shutdown requested through
// ctx, and an error if it cannot listen or the server fails.
func (s *ProxierHealthServer) Run(ctx context.Context, addr string) error {
	l, err := s.listener.Listen(ctx, addr)
	if err != nil {
		return fmt.Errorf("start proxier health server: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	klog.V(3).InfoS("Starting healthz HTTP server", "address", addr)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("proxier health server on %s: %w", addr, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shut down proxier health server on %s: %w", addr, err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("proxier health server on %s: %w", addr, err)
	}
	return nil
}
