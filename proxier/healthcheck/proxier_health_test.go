package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const timeout = 60 * time.Second

// probe is one answer of /healthz or /livez.
type probe struct {
	code int
	body map[string]any
	hdr  http.Header
}

func get(t *testing.T, client *http.Client, url string) probe {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	p := probe{code: resp.StatusCode, hdr: resp.Header}
	if err := json.NewDecoder(resp.Body).Decode(&p.body); err != nil {
		t.Fatalf("GET %s: body is not JSON: %v", url, err)
	}
	return p
}

func counterValue(t *testing.T, vec *prometheus.CounterVec, code string) float64 {
	t.Helper()
	var m dto.Metric
	if err := vec.WithLabelValues(code).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func deletingNode() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", DeletionTimestamp: &metav1.Time{Time: t0}}}
}

func taintedNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: ToBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}},
	}
}

func readyNode() *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}} }

// step is one action on the server followed by the expected probe codes.
type step struct {
	do      func(s *ProxierHealthServer, c *clocktesting.FakeClock)
	healthz int
	livez   int
}

var (
	queued  = func(s *ProxierHealthServer, _ *clocktesting.FakeClock) { s.QueuedUpdate() }
	updated = func(s *ProxierHealthServer, _ *clocktesting.FakeClock) { s.Updated() }
)

func wait(d time.Duration) func(*ProxierHealthServer, *clocktesting.FakeClock) {
	return func(_ *ProxierHealthServer, c *clocktesting.FakeClock) { c.Step(d) }
}

func node(n *v1.Node) func(*ProxierHealthServer, *clocktesting.FakeClock) {
	return func(s *ProxierHealthServer, _ *clocktesting.FakeClock) { s.SyncNode(n) }
}

const ok, unavailable = http.StatusOK, http.StatusServiceUnavailable

func TestProxierHealthStates(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"fresh server is healthy", []step{{nil, ok, ok}}},
		{"starting up: nothing queued stays healthy", []step{{wait(10 * timeout), ok, ok}}},
		{"before the first sync a queued update goes stale", []step{
			{queued, ok, ok},
			{wait(timeout - time.Second), ok, ok},
			{wait(time.Second), unavailable, unavailable},
			{updated, ok, ok},
		}},
		{"later queued updates do not restart the timeout", []step{
			{updated, ok, ok},
			{queued, ok, ok},
			{wait(timeout / 2), ok, ok},
			{queued, ok, ok},
			{wait(timeout / 2), unavailable, unavailable},
			{queued, unavailable, unavailable},
			{updated, ok, ok},
			{wait(10 * timeout), ok, ok},
		}},
		{"a sync in time keeps it healthy", []step{
			{queued, ok, ok},
			{wait(timeout - time.Second), ok, ok},
			{updated, ok, ok},
			{queued, ok, ok},
			{wait(timeout - time.Second), ok, ok},
		}},
		{"node being deleted fails healthz only", []step{
			{node(deletingNode()), unavailable, ok},
			{node(readyNode()), ok, ok},
		}},
		{"autoscaler taint fails healthz only", []step{
			{node(taintedNode()), unavailable, ok},
			{node(readyNode()), ok, ok},
		}},
		{"node object gone fails healthz only", []step{{node(nil), unavailable, ok}}},
		{"stale and deleting", []step{
			{queued, ok, ok},
			{node(deletingNode()), unavailable, ok},
			{wait(timeout), unavailable, unavailable},
			{updated, unavailable, ok},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			s := NewProxierHealthServer(ProxierHealthConfig{HealthTimeout: timeout, Clock: clk})
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			for i, st := range tc.steps {
				if st.do != nil {
					st.do(s, clk)
				}
				if got := get(t, srv.Client(), srv.URL+"/healthz").code; got != st.healthz {
					t.Errorf("step %d: /healthz = %d, want %d", i, got, st.healthz)
				}
				if got := get(t, srv.Client(), srv.URL+"/livez").code; got != st.livez {
					t.Errorf("step %d: /livez = %d, want %d", i, got, st.livez)
				}
				if got, want := s.IsHealthy(), st.livez == ok; got != want {
					t.Errorf("step %d: IsHealthy() = %v, want %v", i, got, want)
				}
			}
		})
	}
}

func TestProxierHealthBodiesAndMetrics(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	m := metrics.New(prometheus.NewRegistry())
	s := NewProxierHealthServer(ProxierHealthConfig{HealthTimeout: timeout, Clock: clk, Metrics: m})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	s.Updated() // at t0
	clk.Step(time.Minute)
	p := get(t, srv.Client(), srv.URL+"/healthz")
	now := t0.Add(time.Minute).Format(time.RFC3339Nano)
	want := map[string]any{"lastUpdated": now, "currentTime": now, "nodeEligible": true, "healthy": true}
	checkBody(t, "healthy /healthz", p, want)
	if ct, nosniff := p.hdr.Get("Content-Type"), p.hdr.Get("X-Content-Type-Options"); ct != "application/json" || nosniff != "nosniff" {
		t.Errorf("headers: Content-Type %q, X-Content-Type-Options %q", ct, nosniff)
	}

	s.QueuedUpdate()
	clk.Step(timeout)
	s.SyncNode(taintedNode())
	later := t0.Add(time.Minute + timeout).Format(time.RFC3339Nano)
	p = get(t, srv.Client(), srv.URL+"/healthz")
	want = map[string]any{"lastUpdated": t0.Format(time.RFC3339Nano), "currentTime": later, "nodeEligible": false, "healthy": false}
	checkBody(t, "stale /healthz", p, want)
	p = get(t, srv.Client(), srv.URL+"/livez")
	delete(want, "nodeEligible")
	checkBody(t, "stale /livez", p, want)

	for _, c := range []struct {
		vec  *prometheus.CounterVec
		code string
		want float64
	}{
		{m.ProxyHealthzTotal, "200", 1},
		{m.ProxyHealthzTotal, "503", 1},
		{m.ProxyLivezTotal, "200", 0},
		{m.ProxyLivezTotal, "503", 1},
	} {
		if got := counterValue(t, c.vec, c.code); got != c.want {
			t.Errorf("counter code=%s: %v, want %v", c.code, got, c.want)
		}
	}
}

func checkBody(t *testing.T, what string, p probe, want map[string]any) {
	t.Helper()
	if len(p.body) != len(want) {
		t.Errorf("%s: body %v, want %v", what, p.body, want)
		return
	}
	for k, v := range want {
		if p.body[k] != v {
			t.Errorf("%s: %s = %v, want %v (body %v)", what, k, p.body[k], v, p.body)
		}
	}
}

// notifyingListener tells the test which real address Run listens on.
type notifyingListener struct {
	inner  Listener
	opened chan string
}

func (n notifyingListener) Listen(ctx context.Context, addr string) (net.Listener, error) {
	l, err := n.inner.Listen(ctx, addr)
	if err == nil {
		n.opened <- l.Addr().String()
	}
	return l, err
}

func TestProxierHealthRun(t *testing.T) {
	fake := NewLoopbackListener()
	nl := notifyingListener{inner: fake, opened: make(chan string, 1)}
	s := NewProxierHealthServer(ProxierHealthConfig{HealthTimeout: timeout, Listener: nl})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, "0.0.0.0:10256") }()
	addr := <-nl.opened

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if p := get(t, client, "http://"+addr+"/healthz"); p.code != ok {
		t.Errorf("/healthz through Run = %d, want 200", p.code)
	}
	if got := fake.Open(); len(got) != 1 || got[0] != "0.0.0.0:10256" {
		t.Errorf("open listeners %v, want [0.0.0.0:10256]", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	if got := fake.Open(); len(got) != 0 {
		t.Errorf("listeners still open after Run returned: %v", got)
	}
}

func TestProxierHealthRunListenFailure(t *testing.T) {
	fake := NewLoopbackListener()
	fake.SetFailure("0.0.0.0:10256", ErrAddressInUse)
	s := NewProxierHealthServer(ProxierHealthConfig{Listener: fake})
	err := s.Run(context.Background(), "0.0.0.0:10256")
	if !errors.Is(err, ErrAddressInUse) {
		t.Errorf("Run = %v, want an error wrapping ErrAddressInUse", err)
	}
}
