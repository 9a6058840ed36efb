package userspace

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// LocalhostConfig configures LocalhostNodePorts.
type LocalhostConfig struct {
	// Families are the families whose loopback address serves NodePorts:
	// 127.0.0.1 for IPv4, ::1 for IPv6.
	Families []v1.IPFamily
	// Sockets opens the listeners and dials endpoints; nil means
	// HostSockets.
	Sockets Sockets
	// Clock times session affinity; nil means the real clock.
	Clock clock.PassiveClock
	// DialTimeout bounds each connection attempt to an endpoint; 0 means
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// Registerer receives the listener metrics; nil registers none.
	Registerer prometheus.Registerer
}

// LocalhostNodePorts serves TCP NodePorts on the node's loopback
// addresses for the kernel modes that cannot (KEP-6032): nf_tables has no
// route_localnet, so a DNAT of a loopback destination to a pod is never
// routed. One listener per TCP NodePort and family, on the loopback
// address and the NodePort itself, relays each connection to an endpoint
// the way the userspace mode does (round-robin, sessionAffinity ClientIP,
// the next endpoint when a dial fails). Connections come from the node,
// so they reach the endpoints the node's own traffic reaches: the
// Cluster selection, even under externalTrafficPolicy Local (kube-proxy
// short-circuits node-originated traffic the same way). UDP and SCTP are
// not served: their loopback NodePorts refuse, as before.
type LocalhostNodePorts struct {
	cfg       LocalhostConfig
	metrics   *metrics // relay series, unregistered
	listeners *prometheus.GaugeVec
	failures  *prometheus.CounterVec

	mu      sync.Mutex
	proxies map[localhostKey]*tcpProxy
	failed  map[localhostKey]bool // a bind failure was logged
	closed  bool
}

// localhostKey names one loopback listener.
type localhostKey struct {
	name     proxier.ServicePortName
	family   v1.IPFamily
	nodePort uint16
}

// NewLocalhostNodePorts returns a relay with no listeners; Sync opens
// them.
func NewLocalhostNodePorts(cfg LocalhostConfig) (*LocalhostNodePorts, error) {
	if cfg.Sockets == nil {
		cfg.Sockets = HostSockets{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	m, err := newMetrics(nil)
	if err != nil {
		return nil, err
	}
	l := &LocalhostNodePorts{cfg: cfg, metrics: m, proxies: map[localhostKey]*tcpProxy{}, failed: map[localhostKey]bool{},
		listeners: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_nftables_localhost_nodeport_listeners",
			Help: "Number of active localhost NodePort userspace proxy listeners.",
		}, []string{"ip_family"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total",
			Help: "Number of localhost NodePort userspace proxy listener creation failures.",
		}, []string{"ip_family"}),
	}
	for _, f := range cfg.Families {
		l.listeners.WithLabelValues(string(f))
		l.failures.WithLabelValues(string(f))
	}
	if err := registerAll(cfg.Registerer, l.listeners, l.failures); err != nil {
		return nil, fmt.Errorf("localhost NodePorts: %w", err)
	}
	return l, nil
}

// relaySeries is the one (unregistered) series set every listener shares:
// the relay's per-port series would cost each listener more than its
// goroutine does, and nobody scrapes them.
const relaySeries = "localhost-nodeports"

// registerAll registers every collector or, on an error, none.
func registerAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, d := range cs[:i] {
				reg.Unregister(d)
			}
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

// loopbackAddr is the family's loopback address.
func loopbackAddr(f v1.IPFamily) netip.Addr {
	if f == v1.IPv6Protocol {
		return netip.IPv6Loopback()
	}
	return netip.MustParseAddr("127.0.0.1")
}

// planLocalhost is what the listeners should be: every TCP NodePort of a
// service with a cluster IP of a served family, with its Cluster
// endpoints of that family. Pure.
// scope limits it to some service ports; nil means all.
func planLocalhost(st *proxier.State, families []v1.IPFamily, scope map[proxier.ServicePortName]bool) map[localhostKey]socketSpec {
	want := map[localhostKey]socketSpec{}
	for name, sp := range st.Services {
		if sp.Protocol != v1.ProtocolTCP || sp.NodePort == 0 || scope != nil && !scope[name] {
			continue
		}
		for _, fam := range families {
			if _, ok := sp.ClusterIP(fam); !ok {
				continue
			}
			sel := proxier.SelectEndpoints(sp, st.Endpoints[name], st.Node, fam)
			want[localhostKey{name: name, family: fam, nodePort: sp.NodePort}] = socketSpec{
				protocol:  v1.ProtocolTCP,
				endpoints: addrPorts(sel.Cluster),
				affinity:  time.Duration(sp.AffinityTimeoutSeconds) * time.Second,
			}
		}
	}
	return want
}

// Sync makes the listeners match the state: new NodePorts get one,
// removed ones stop accepting (their connections drain), the others get
// the new endpoints. A partial sync (diff not Full) looks only at the
// service ports the diff names, and at those whose listener failed. A
// port another socket holds is logged once, counted, and retried on the
// next sync; the error joins every such failure.
func (l *LocalhostNodePorts) Sync(st *proxier.State, diff *proxier.Diff) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	scope := l.scopeLocked(diff)
	want := planLocalhost(st, l.cfg.Families, scope)
	for key, p := range l.proxies {
		if _, ok := want[key]; !ok && (scope == nil || scope[key.name]) {
			p.close(true)
			l.metrics.release(relaySeries)
			delete(l.proxies, key)
			klog.V(2).InfoS("Closed localhost NodePort listener", "servicePort", key.name, "family", key.family, "nodePort", key.nodePort)
		}
	}
	for key := range l.failed {
		if _, ok := want[key]; !ok && (scope == nil || scope[key.name]) {
			delete(l.failed, key)
		}
	}
	var errs []error
	for key, spec := range want {
		p := l.proxies[key]
		if p == nil {
			var err error
			if p, err = l.open(key); err != nil {
				errs = append(errs, err)
				continue
			}
			l.proxies[key] = p
		}
		p.update(spec.endpoints, spec.affinity)
	}
	l.countLocked()
	return errors.Join(errs...)
}

// scopeLocked is what a sync looks at: nil (everything) on a full sync,
// else the changed service ports and those whose listener failed.
func (l *LocalhostNodePorts) scopeLocked(diff *proxier.Diff) map[proxier.ServicePortName]bool {
	if diff == nil || diff.Full {
		return nil
	}
	scope := make(map[proxier.ServicePortName]bool, len(diff.Changed)+len(l.failed))
	for name := range diff.Changed {
		scope[name] = true
	}
	for key := range l.failed {
		scope[key.name] = true
	}
	return scope
}

// open binds one loopback listener.
func (l *LocalhostNodePorts) open(key localhostKey) (*tcpProxy, error) {
	label := key.name.String()
	base := proxyBase{label: label, bal: newBalancer(l.cfg.Clock), sockets: l.cfg.Sockets, tr: &trState{},
		pm: l.metrics.acquire(relaySeries), traffic: &trafficCount{port: key.nodePort}}
	addr := netip.AddrPortFrom(loopbackAddr(key.family), key.nodePort)
	p, err := newTCPProxy(base, addr, l.cfg.DialTimeout)
	if err != nil {
		l.metrics.release(relaySeries)
		l.failures.WithLabelValues(string(key.family)).Inc()
		if !l.failed[key] {
			l.failed[key] = true
			klog.ErrorS(err, "Failed to listen for a localhost NodePort; retrying on every sync", "servicePort", key.name, "address", addr)
		}
		return nil, fmt.Errorf("localhost NodePort %s on %s: %w", key.name, addr, err)
	}
	delete(l.failed, key)
	klog.V(2).InfoS("Listening for a localhost NodePort", "servicePort", key.name, "address", addr)
	return p, nil
}

func (l *LocalhostNodePorts) countLocked() {
	n := map[v1.IPFamily]int{}
	for key := range l.proxies {
		n[key.family]++
	}
	for _, f := range l.cfg.Families {
		l.listeners.WithLabelValues(string(f)).Set(float64(n[f]))
	}
}

// Close closes every listener and connection.
func (l *LocalhostNodePorts) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	for _, p := range l.proxies {
		p.close(false)
		l.metrics.release(relaySeries)
	}
	l.proxies = map[localhostKey]*tcpProxy{}
	l.countLocked()
	return nil
}

// EndConnectionsTo is Backend.EndConnectionsTo for the localhost NodePort
// listeners.
func (l *LocalhostNodePorts) EndConnectionsTo(addrs []netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return endAll(addrs, maps.Values(l.proxies))
}
