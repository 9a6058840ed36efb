package userspace

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
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
	// skipped: service ports this mode does not serve, per protocol
	// (skipped.go).
	skipped *prometheus.GaugeVec
	// udpDropped: datagrams from new UDP clients dropped because their
	// proxy socket was at its session cap, per service port.
	udpDropped *prometheus.CounterVec
	// unreserved: NodePort holder sockets that could not be opened
	// (nodeports.go), per protocol.
	unreserved *prometheus.GaugeVec

	mu   sync.Mutex
	refs map[string]int
}

// portMetrics are one service port's series.
type portMetrics struct {
	active     prometheus.Gauge
	toEndpoint prometheus.Counter
	toClient   prometheus.Counter
	errors     *prometheus.CounterVec
	udpDropped prometheus.Counter // UDP ports only; nil for TCP
}

// acquireUDP is acquire for a UDP service port, whose series include
// the session cap's drops.
func (m *metrics) acquireUDP(servicePort string) *portMetrics {
	pm := m.acquire(servicePort)
	pm.udpDropped = m.udpDropped.WithLabelValues(servicePort)
	return pm
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
			Help: "(Deprecated: use switchyard_rules_repaired_total.) Syncs that found the userspace proxy's iptables rules changed or removed outside switchyard and restored them, per IP family (ipv4, ipv6).",
		}, []string{"family"}),
		skipped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "switchyard", Subsystem: "userspace", Name: "skipped_service_ports",
			Help: "Service ports the userspace proxy does not serve (SCTP), per protocol, as of the last sync.",
		}, []string{"protocol"}),
		udpDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "userspace", Name: "udp_sessions_dropped_total",
			Help: "Datagrams from new UDP clients the userspace proxy dropped because the proxy socket already had its maximum number of sessions, per service port.",
		}, []string{"service_port"}),
		unreserved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "switchyard", Subsystem: "userspace", Name: "nodeports_unreserved",
			Help: "NodePort address:port pairs the userspace proxy could not reserve (another socket holds the port), per protocol, as of the last sync.",
		}, []string{"protocol"}),
		refs: map[string]int{},
	}
	m.skipped.WithLabelValues(string(v1.ProtocolSCTP))
	for _, p := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP} {
		m.unreserved.WithLabelValues(string(p))
	}
	for _, r := range reasons() {
		m.errors.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{m.active, m.bytes, m.errors, m.repairs, m.skipped, m.udpDropped, m.unreserved} {
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
	m.udpDropped.DeleteLabelValues(servicePort)
}
