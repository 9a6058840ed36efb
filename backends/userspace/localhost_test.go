package userspace

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// freeLoopbackPort returns a port of 127.0.0.1 nothing listens on, to
// stand for a NodePort.
func freeLoopbackPort(t *testing.T) uint16 {
	t.Helper()
	return closedPort(t).Port()
}

func newLocalhostForTest(t *testing.T) (*LocalhostNodePorts, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	l, err := NewLocalhostNodePorts(LocalhostConfig{Families: []v1.IPFamily{v1.IPv4Protocol},
		Clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, reg
}

func nodePortService(st *proxier.State, name string, nodePort uint16, eps ...netip.AddrPort) *proxier.ServicePort {
	sp := addService(st, spName(name, v1.ProtocolTCP), "10.96.0.10", 80, eps...)
	sp.NodePort = nodePort
	return sp
}

func TestLocalhostNodePortsRelay(t *testing.T) {
	l, reg := newLocalhostForTest(t)
	a, b := startTCPServer(t, "a"), startTCPServer(t, "b")
	np := freeLoopbackPort(t)
	st := newState()
	nodePortService(st, "web", np, a.addr(), b.addr())
	if err := l.Sync(st, nil); err != nil {
		t.Fatal(err)
	}
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), np)
	order := byAddr(a, b)
	if got := requests(t, addr, 4); !slices.Equal(got, append(slices.Clone(order), order...)) {
		t.Errorf("127.0.0.1:%d answered %v, want round-robin %v", np, got, order)
	}
	if v, _ := metricValue(t, reg, "kubeproxy_nftables_localhost_nodeport_listeners", "ip_family", "IPv4"); v != 1 {
		t.Errorf("listeners gauge %v, want 1", v)
	}

	// Removed: the port is closed again.
	if err := l.Sync(newState(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := request(t, addr, "x"); err == nil {
		t.Errorf("127.0.0.1:%d still answers after its service was removed", np)
	}
	if v, _ := metricValue(t, reg, "kubeproxy_nftables_localhost_nodeport_listeners", "ip_family", "IPv4"); v != 0 {
		t.Errorf("listeners gauge %v after removal, want 0", v)
	}
}

// TestLocalhostNodePortsSelection: node-originated traffic reaches the
// Cluster endpoints, also under externalTrafficPolicy Local; UDP, ports
// without a NodePort and services of an unserved family get no listener;
// affinity pins the one client (127.0.0.1) to one endpoint.
func TestLocalhostNodePortsSelection(t *testing.T) {
	st := newState()
	local, remote := netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("10.0.1.1:80")
	sp := nodePortService(st, "etp-local", 30001, local, remote)
	sp.ExternalPolicyLocal = true
	sp.AffinityTimeoutSeconds = 10800
	st.Endpoints[sp.Name][1].IsLocal, st.Endpoints[sp.Name][1].NodeName = false, "node-b"
	nodePortService(st, "no-nodeport", 0, local)
	udp := addService(st, spName("dns", v1.ProtocolUDP), "10.96.0.11", 53, local)
	udp.NodePort = 30002
	v6 := nodePortService(st, "v6", 30003, netip.MustParseAddrPort("[fd00::1]:80"))
	v6.ClusterIPs = []netip.Addr{netip.MustParseAddr("fd00:96::1")}

	want := planLocalhost(st, []v1.IPFamily{v1.IPv4Protocol}, nil)
	if len(want) != 1 {
		t.Fatalf("planned %d listeners, want only etp-local's: %v", len(want), want)
	}
	spec := want[localhostKey{name: sp.Name, family: v1.IPv4Protocol, nodePort: 30001}]
	if !slices.Equal(spec.endpoints, []netip.AddrPort{local, remote}) {
		t.Errorf("endpoints %v, want both (node traffic is short-circuited to Cluster)", spec.endpoints)
	}
	if spec.affinity.Seconds() != 10800 {
		t.Errorf("affinity %v, want 3h", spec.affinity)
	}
	if got := planLocalhost(st, []v1.IPFamily{v1.IPv6Protocol}, nil); len(got) != 1 {
		t.Errorf("IPv6 plan %v, want the v6 service only", got)
	}
}

// TestLocalhostNodePortsPortTaken: a NodePort another socket holds on
// loopback is counted and retried, and served once it is free.
func TestLocalhostNodePortsPortTaken(t *testing.T) {
	l, reg := newLocalhostForTest(t)
	a := startTCPServer(t, "a")
	holder, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	np := uint16(holder.Addr().(*net.TCPAddr).Port)
	st := newState()
	nodePortService(st, "web", np, a.addr())
	if err := l.Sync(st, nil); err == nil {
		t.Fatal("sync succeeded although the port is taken")
	}
	if v, _ := metricValue(t, reg, "kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total", "ip_family", "IPv4"); v != 1 {
		t.Errorf("failures %v, want 1", v)
	}
	holder.Close()
	if err := l.Sync(st, nil); err != nil {
		t.Fatalf("sync after the port was freed: %v", err)
	}
	if got := requests(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), np), 1); got[0] != "a" {
		t.Errorf("answered by %v, want a", got)
	}
}

// TestLocalhostNodePortsIPv6: the IPv6 listener is on ::1.
func TestLocalhostNodePortsIPv6(t *testing.T) {
	probe, err := net.ListenTCP("tcp6", &net.TCPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	np := uint16(probe.Addr().(*net.TCPAddr).Port)
	probe.Close()
	l, err := NewLocalhostNodePorts(LocalhostConfig{Families: []v1.IPFamily{v1.IPv6Protocol}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := newState()
	sp := nodePortService(st, "web", np)
	sp.ClusterIPs = []netip.Addr{netip.MustParseAddr("fd00:96::10")}
	ln6, err := net.ListenTCP("tcp6", &net.TCPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	b := serveTCP(t, "b", ln6)
	setEndpoints(st, sp.Name, b.addr())
	if err := l.Sync(st, nil); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTCP("tcp6", nil, &net.TCPAddr{IP: net.IPv6loopback, Port: int(np)})
	if err != nil {
		t.Fatalf("[::1]:%d: %v", np, err)
	}
	defer c.Close()
	c.Write([]byte("x"))
	c.CloseWrite()
	out := make([]byte, 16)
	n, _ := c.Read(out)
	if string(out[:n]) != "b:x" {
		t.Errorf("[::1]:%d answered %q, want b:x", np, out[:n])
	}
}

// TestLocalhostNodePortsPartialSync: a partial sync looks only at the
// service ports its diff names: others keep their listeners, a named one
// that is gone loses its own.
func TestLocalhostNodePortsPartialSync(t *testing.T) {
	l, reg := newLocalhostForTest(t)
	a := startTCPServer(t, "a")
	st := newState()
	web := nodePortService(st, "web", freeLoopbackPort(t), a.addr())
	other := nodePortService(st, "other", freeLoopbackPort(t), a.addr())
	if err := l.Sync(st, &proxier.Diff{Full: true}); err != nil {
		t.Fatal(err)
	}
	gone := cloneState(st)
	delete(gone.Services, web.Name)
	delete(gone.Services, other.Name) // not named by the diff: its listener stays
	if err := l.Sync(gone, &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{web.Name: {}}}); err != nil {
		t.Fatal(err)
	}
	if v, _ := metricValue(t, reg, "kubeproxy_nftables_localhost_nodeport_listeners", "ip_family", "IPv4"); v != 1 {
		t.Errorf("listeners %v after a partial sync naming web, want 1 (other's)", v)
	}
	if got := requests(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), other.NodePort), 1); got[0] != "a" {
		t.Errorf("other's listener answered %v", got)
	}
}
