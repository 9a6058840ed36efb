package userspace

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/shrink"
	"github.com/switchyard-proxy/switchyard/proxier"
	pmetrics "github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// relaySet is the backend's proxy sockets: one per service port, family
// and traffic kind (socketKey), the removed TCP ones whose connections
// still drain, and the UDP proxy ports whose conntrack entries must go
// (conntrack.go). The Backend's lock guards it.
type relaySet struct {
	cfg      *Config
	metrics  *metrics
	sockets  map[socketKey]proxySocket
	peak     shrink.Peak   // of sockets, to give back its space after mass deletions
	draining []proxySocket // removed TCP sockets with live connections
	flush    conntrackFlush
}

func newRelaySet(cfg *Config, m *metrics) *relaySet {
	return &relaySet{cfg: cfg, metrics: m, sockets: map[socketKey]proxySocket{}, flush: conntrackFlush{}}
}

// open opens the missing sockets and gives every socket its endpoints.
// Sockets that fail to open are reported; the others are kept.
func (rs *relaySet) open(specs map[socketKey]socketSpec) error {
	var errs []error
	for key, spec := range specs {
		s, ok := rs.sockets[key]
		if !ok {
			var err error
			if s, err = rs.openOne(key, spec); err != nil {
				errs = append(errs, err)
				continue
			}
			rs.sockets[key] = s
		}
		if spec.protocol == v1.ProtocolUDP && len(spec.endpoints) == 0 && s.balancer().size() > 0 {
			rs.flush.add(key.family, s.port())
		}
		s.update(spec.endpoints, spec.affinity)
		s.setTransparency(spec.transparency)
	}
	return errors.Join(errs...)
}

func (rs *relaySet) openOne(key socketKey, spec socketSpec) (proxySocket, error) {
	label, proto := key.name.String(), spec.protocol
	base := proxyBase{label: label, bal: newBalancer(rs.cfg.Clock), sockets: rs.cfg.Sockets, tr: &trState{},
		traffic: &trafficCount{port: spec.port}}
	addr := netip.AddrPortFrom(rs.cfg.listenIP(key.family), 0)
	var s proxySocket
	var err error
	if proto == v1.ProtocolUDP {
		base.pm = rs.metrics.acquireUDP(label)
		s, err = newUDPProxy(base, addr, rs.cfg.Clock, udpLimits{idle: rs.cfg.UDPIdleTimeout, maxSessions: rs.cfg.UDPMaxSessions})
	} else {
		base.pm = rs.metrics.acquire(label)
		s, err = newTCPProxy(base, addr, rs.cfg.DialTimeout)
	}
	if err != nil {
		rs.metrics.release(label)
		return nil, fmt.Errorf("userspace: open %s proxy socket for %s (%s): %w", proto, key.name, key.family, err)
	}
	klog.V(4).InfoS("Opened proxy socket", "servicePort", key.name, "family", key.family,
		"traffic", key.kind, "protocol", proto, "port", s.port())
	return s, nil
}

// ports are the sockets' ports, for the render.
func (rs *relaySet) ports() map[socketKey]uint16 {
	ports := make(map[socketKey]uint16, len(rs.sockets))
	for key, s := range rs.sockets {
		ports[key] = s.port()
	}
	return ports
}

// retire closes the sockets no service port needs any more; TCP ones
// with live connections drain.
func (rs *relaySet) retire(specs map[socketKey]socketSpec) {
	for key, s := range rs.sockets {
		if _, ok := specs[key]; ok {
			continue
		}
		delete(rs.sockets, key)
		if key.name.Protocol == v1.ProtocolUDP {
			rs.flush.add(key.family, s.port())
		}
		s.close(true)
		rs.metrics.release(key.name.String())
		klog.V(4).InfoS("Closed proxy socket", "servicePort", key.name, "family", key.family,
			"traffic", key.kind, "port", s.port(), "draining", s.active())
		rs.draining = append(rs.draining, s)
	}
	rs.draining = slices.DeleteFunc(rs.draining, func(s proxySocket) bool { return s.active() == 0 })
	rs.sockets = shrink.Map(rs.sockets, &rs.peak)
}

// drain, with the sentinels closed (new connections now go to the
// kernel fallback), gives connections already on their way to a proxy
// socket a moment to be accepted, stops accepting and lets the TCP
// connections being relayed finish, for up to grace.
func (rs *relaySet) drain(grace time.Duration) {
	if grace <= 0 {
		return
	}
	time.Sleep(min(grace, handoffDelay))
	for _, s := range rs.sockets {
		if _, ok := s.(*tcpProxy); ok {
			s.close(true)
		}
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && rs.active() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
}

// active counts the live connections and sessions of every socket.
func (rs *relaySet) active() int {
	live := 0
	for _, s := range rs.sockets {
		live += s.active()
	}
	for _, s := range rs.draining {
		live += s.active()
	}
	return live
}

// handoffDelay covers a SYN marked just before its sentinel closed, on
// its way to the proxy socket's accept queue.
const handoffDelay = 50 * time.Millisecond

// closeAll closes every socket and every connection and session it
// relays.
func (rs *relaySet) closeAll() {
	for key, s := range rs.sockets {
		s.close(false)
		rs.metrics.release(key.name.String())
	}
	for _, s := range rs.draining {
		s.close(false)
	}
	clear(rs.sockets)
	rs.draining = nil
}

// port is the port of the socket serving a service port's traffic of
// one family; external selects the external socket when the port has
// one.
func (rs *relaySet) port(name proxier.ServicePortName, family v1.IPFamily, external bool) (uint16, bool) {
	key := socketKey{name: name, family: family, kind: internalTraffic}
	if ext := (socketKey{name: name, family: family, kind: externalTraffic}); external && rs.sockets[ext] != nil {
		key = ext
	}
	s, ok := rs.sockets[key]
	if !ok {
		return 0, false
	}
	return s.port(), true
}

// endTo aborts the relayed TCP connections to addrs, draining sockets'
// included (vanished.go).
func (rs *relaySet) endTo(addrs []netip.Addr) int {
	return endAll(addrs, maps.Values(rs.sockets), slices.Values(rs.draining))
}

// table lists the sockets as they are now, sorted by service port,
// family and traffic kind (relaytable.go).
func (rs *relaySet) table() RelayTable {
	out := RelayTable{Relays: []Relay{}}
	for key, s := range rs.sockets {
		eps, affinity := s.balancer().state()
		if eps == nil {
			eps = []netip.AddrPort{}
		}
		out.Relays = append(out.Relays, Relay{
			Namespace: key.name.Namespace, Name: key.name.Name, Port: key.name.Port, Protocol: key.name.Protocol,
			Family: key.family, Traffic: key.kind.String(),
			Listen:    netip.AddrPortFrom(rs.cfg.listenIP(key.family), s.port()),
			Balancing: "round-robin", Endpoints: eps, AffinitySeconds: int(affinity.Seconds()),
			FromClient: relayTransparency(s.transparency()),
		})
	}
	slices.SortFunc(out.Relays, func(a, b Relay) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port),
			cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Family, b.Family), cmp.Compare(a.Traffic, b.Traffic))
	})
	return out
}

// traffic is each open socket's counts (servicetraffic.go); a service
// port's counts go with its sockets.
func (rs *relaySet) traffic() []pmetrics.ServiceTrafficSample {
	out := make([]pmetrics.ServiceTrafficSample, 0, len(rs.sockets))
	for key, s := range rs.sockets {
		c := s.counts()
		port := key.name.Port
		if port == "" {
			port = strconv.Itoa(int(c.port))
		}
		out = append(out, pmetrics.ServiceTrafficSample{
			Namespace: key.name.Namespace, Service: key.name.Name, Port: port,
			Protocol: string(key.name.Protocol), Family: string(key.family),
			Connections: c.conns.Load(), Packets: c.pkts.Load(), Bytes: c.octets.Load(),
		})
	}
	return out
}
