package userspace

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
)

func TestMetricsRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Runner: iptablestest.NewFake(), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	// Every reason is exported from the start, at zero.
	for _, r := range reasons() {
		if v, ok := metricValue(t, reg, "switchyard_userspace_balancer_errors_total", "reason", r); !ok || v != 0 {
			t.Errorf("reason %s: %v, %v", r, v, ok)
		}
	}
	if _, err := New(Config{Runner: iptablestest.NewFake(), Registerer: reg}); err == nil {
		t.Errorf("a second backend registered the same metrics")
	}
	if _, err := New(Config{Runner: iptablestest.NewFake()}); err != nil {
		t.Errorf("without a registerer: %v", err)
	}
}

// TestMetricsRefcount: a service port's series live as long as one of
// its sockets does.
func TestMetricsRefcount(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.acquire("ns/web:http"), m.acquire("ns/web:http")
	a.toClient.Add(3)
	m.release("ns/web:http")
	if v, ok := metricValue(t, reg, "switchyard_userspace_bytes_total", "service_port", "ns/web:http", "direction", DirectionToClient); !ok || v != 3 {
		t.Errorf("after one release: %v, %v; want 3, kept", v, ok)
	}
	m.release("ns/web:http")
	if _, ok := metricValue(t, reg, "switchyard_userspace_bytes_total", "service_port", "ns/web:http", "direction", DirectionToClient); ok {
		t.Errorf("series kept after the last release")
	}
}
