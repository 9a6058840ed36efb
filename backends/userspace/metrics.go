package userspace

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the reason label of switchyard_userspace_balancer_errors_total.
const (
	// ReasonNoEndpoints: a connection or UDP session arrived while the
	// socket had no endpoint; it was closed (TCP) or dropped (UDP).
	ReasonNoEndpoints = "no_endpoints"
	// ReasonDialFailed: connecting to one endpoint failed; the next one
	// is tried.
	ReasonDialFailed = "dial_failed"
	// ReasonAllEndpointsFailed: every endpoint failed for one connection;
	// it was closed.
	ReasonAllEndpointsFailed = "all_endpoints_failed"
	// ReasonEndpointRefused: a UDP endpoint answered with an ICMP error;
	// the session was closed.
	ReasonEndpointRefused = "endpoint_refused"
)

// Values of the direction label of switchyard_userspace_bytes_total.
const (
	DirectionToEndpoint = "to_endpoint"
	DirectionToClient   = "to_client"
)

func reasons() []string {
	return []string{ReasonNoEndpoints, ReasonDialFailed, ReasonAllEndpointsFailed, ReasonEndpointRefused}
}

// metrics are the backend's collectors. Per-service-port series are
// reference counted over the port's sockets and deleted with the last.
type metrics struct {
	active *prometheus.GaugeVec
	bytes  *prometheus.CounterVec
	errors *prometheus.CounterVec
	// repairs counts syncs that found rules changed outside switchyard
	// and restored them, per family.
	repairs *prometheus.CounterVec

	mu   sync.Mutex
	refs map[string]int
}

// portMetrics are one service port's series.
type portMetrics struct {
	active     prometheus.Gauge
	toEndpoint prometheus.Counter
	toClient   prometheus.Counter
	errors     *prometheus.CounterVec
}

func (pm *portMetrics) fail(reason string) { pm.errors.WithLabelValues(reason).Inc() }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "switchyard", Subsystem: "userspace", Name: "active_connections",
			Help: "TCP connections and UDP sessions the userspace proxy is relaying, per service port.",
		}, []string{"service_port"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "userspace", Name: "bytes_total",
			Help: "Bytes the userspace proxy relayed, per service port and direction (to_endpoint, to_client).",
		}, []string{"service_port", "direction"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "userspace", Name: "balancer_errors_total",
			Help: "Connections or sessions the userspace proxy could not send to an endpoint, by reason.",
		}, []string{"reason"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "userspace", Name: "rules_repaired_total",
			Help: "Syncs that found the userspace proxy's iptables rules changed or removed outside switchyard and restored them, per IP family (ipv4, ipv6).",
		}, []string{"family"}),
		refs: map[string]int{},
	}
	for _, r := range reasons() {
		m.errors.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{m.active, m.bytes, m.errors, m.repairs} {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, fmt.Errorf("userspace: register metrics: %w", err)
		}
		done = append(done, c)
	}
	return m, nil
}

// acquire returns the series of a service port and takes a reference.
func (m *metrics) acquire(servicePort string) *portMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs[servicePort]++
	return &portMetrics{
		active:     m.active.WithLabelValues(servicePort),
		toEndpoint: m.bytes.WithLabelValues(servicePort, DirectionToEndpoint),
		toClient:   m.bytes.WithLabelValues(servicePort, DirectionToClient),
		errors:     m.errors,
	}
}

// release drops a reference; the last deletes the port's series.
// Connections still draining then update detached series.
func (m *metrics) release(servicePort string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refs[servicePort]--; m.refs[servicePort] > 0 {
		return
	}
	delete(m.refs, servicePort)
	m.active.DeleteLabelValues(servicePort)
	m.bytes.DeleteLabelValues(servicePort, DirectionToEndpoint)
	m.bytes.DeleteLabelValues(servicePort, DirectionToClient)
}
