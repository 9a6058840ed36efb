package conntrack

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

var _ Table = (*conntracktest.Table)(nil)

func addr(s string) netip.Addr         { return netip.MustParseAddr(s) }
func addrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// Addresses used throughout: one UDP DNS service with every kind of
// service address, two endpoints, a node.
var (
	clusterIP  = addr("10.96.0.10")
	externalIP = addr("203.0.113.7")
	lbIP       = addr("198.51.100.9")
	nodeIP     = addr("192.168.1.5")
	epA        = addrPort("10.244.1.10:53")
	epB        = addrPort("10.244.2.10:53")
	dnsName    = portName("dns", "dns", v1.ProtocolUDP)
)

func portName(svc, port string, proto v1.Protocol) proxier.ServicePortName {
	return proxier.ServicePortName{
		NamespacedName: types.NamespacedName{Namespace: "ns", Name: svc},
		Port:           port,
		Protocol:       proto,
	}
}

// dnsService is the UDP service port: cluster IP, external IP, LB IP and a
// NodePort.
func dnsService() *proxier.ServicePort {
	return &proxier.ServicePort{
		Name: dnsName, Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053,
		ClusterIPs:      []netip.Addr{clusterIP},
		ExternalIPs:     []netip.Addr{externalIP},
		LoadBalancerIPs: []netip.Addr{lbIP},
	}
}

func ready(ap netip.AddrPort) proxier.Endpoint {
	return proxier.Endpoint{IP: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true}
}

func terminating(ap netip.AddrPort) proxier.Endpoint {
	return proxier.Endpoint{IP: ap.Addr(), Port: ap.Port(), Serving: true, Terminating: true}
}

func notServing(ap netip.AddrPort) proxier.Endpoint {
	return proxier.Endpoint{IP: ap.Addr(), Port: ap.Port(), Terminating: true}
}

// state builds a State from (port, endpoints) pairs.
func state(ports ...any) *proxier.State {
	st := &proxier.State{
		Services:  map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node:      proxier.NodeInfo{Name: "node-1", Addresses: []netip.Addr{nodeIP}},
	}
	for i := 0; i < len(ports); i += 2 {
		sp := ports[i].(*proxier.ServicePort)
		st.Services[sp.Name] = sp
		eps := slices.Clone(ports[i+1].([]proxier.Endpoint))
		slices.SortFunc(eps, func(a, b proxier.Endpoint) int { return a.Key().Compare(b.Key()) })
		st.Endpoints[sp.Name] = eps
	}
	return st
}

func eps(e ...proxier.Endpoint) []proxier.Endpoint { return e }

// staleDiff is a partial sync's Diff after endpoints of name went away.
func staleDiff(name proxier.ServicePortName, gone ...netip.AddrPort) *proxier.Diff {
	d := emptyDiff()
	d.Changed[name] = struct{}{}
	for _, ap := range gone {
		d.StaleEndpoints = append(d.StaleEndpoints,
			proxier.StaleEndpoint{Name: name, Endpoint: proxier.Endpoint{IP: ap.Addr(), Port: ap.Port()}})
	}
	return d
}

func emptyDiff() *proxier.Diff {
	return &proxier.Diff{
		Changed:      map[proxier.ServicePortName]struct{}{},
		Deleted:      map[proxier.ServicePortName]*proxier.ServicePort{},
		NewlyServing: map[proxier.ServicePortName]struct{}{},
	}
}

func udpVia(client netip.AddrPort, svc netip.Addr, port uint16, ep netip.AddrPort) conntracktest.Entry {
	return conntracktest.NATed(conntracktest.UDP, client, netip.AddrPortFrom(svc, port), ep)
}

// checkRemaining asserts that exactly want remain in the table.
func checkRemaining(t *testing.T, tb *conntracktest.Table, want []conntracktest.Entry) {
	t.Helper()
	got := append(tb.Entries(v1.IPv4Protocol), tb.Entries(v1.IPv6Protocol)...)
	less := func(a, b conntracktest.Entry) int { return strings.Compare(a.String(), b.String()) }
	got, want = slices.SortedFunc(slices.Values(got), less), slices.SortedFunc(slices.Values(want), less)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("remaining entries (-want +got):\n%s", diff)
	}
}

// c returns the n-th client: distinct source ports, so that no two test
// entries share a tuple (the fake rejects that, as the kernel does).
func c(n int) netip.AddrPort { return netip.AddrPortFrom(addr("10.244.3.5"), uint16(40000+n)) }

func fullDiff() *proxier.Diff {
	d := emptyDiff()
	d.Full = true
	return d
}
