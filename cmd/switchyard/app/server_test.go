package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/userspace"
)

// TestMetricsMux checks what the metrics server serves, with and without
// profiling, and the relay table when the mode has one.
func TestMetricsMux(t *testing.T) {
	tests := []struct {
		path      string
		profiling bool
		relays    bool
		status    int
		body      string
	}{
		{"/proxyMode", false, false, http.StatusOK, "ipvs"},
		{"/metrics", false, false, http.StatusOK, `kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 0`},
		{"/debug/pprof/", false, false, http.StatusNotFound, ""},
		{"/debug/pprof/heap?debug=1", false, false, http.StatusNotFound, ""},
		{"/debug/pprof/", true, false, http.StatusOK, "goroutine"},
		{"/debug/pprof/heap?debug=1", true, false, http.StatusOK, "heap profile"},
		{userspace.RelayTablePath, false, false, http.StatusNotFound, ""},
		{userspace.RelayTablePath, false, true, http.StatusOK, `"balancing": "round-robin"`},
	}
	for _, tt := range tests {
		o := &Options{Mode: ModeIPVS, EnableProfiling: tt.profiling, Families: []v1.IPFamily{v1.IPv4Protocol}}
		reg, _ := newMetrics(o)
		h := serverHandlers{reg: reg}
		if tt.relays {
			h.relays = func() userspace.RelayTable {
				return userspace.RelayTable{Relays: []userspace.Relay{{Name: "web", Balancing: "round-robin"}}}
			}
		}
		srv := httptest.NewServer(metricsMux(o, h))
		status, body := get(t, srv.URL+tt.path)
		srv.Close()
		if status != tt.status || !strings.Contains(body, tt.body) {
			t.Errorf("GET %s (profiling %v) = %d %.80q, want %d containing %q", tt.path, tt.profiling, status, body, tt.status, tt.body)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestRetryServer(t *testing.T) {
	taken := errors.New("listen tcp 0.0.0.0:10256: bind: address already in use")
	calls := 0
	failing := func(context.Context) error { calls++; return taken }
	if err := retryServer("healthz", true, failing)(context.Background()); !errors.Is(err, taken) || calls != 1 {
		t.Fatalf("hard fail: err %v after %d calls, want the bind error after 1", err, calls)
	}
	// Without hard fail the failure is logged and the server waits to
	// retry; ending the context ends the wait, without an error.
	calls = 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- retryServer("healthz", false, failing)(ctx) }()
	cancel()
	if err := <-done; err != nil || calls != 1 {
		t.Fatalf("soft fail: err %v after %d calls, want nil after 1", err, calls)
	}
}
