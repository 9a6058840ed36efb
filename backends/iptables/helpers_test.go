package iptables

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Test helpers that build States by hand from the proxier types.

const testNode = "node-a"

func spn(ns, name, port string, proto v1.Protocol) proxier.ServicePortName {
	return proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: port, Protocol: proto}
}

type svcOpt func(*proxier.ServicePort)

// svc builds a service port "ns/name:port" with the given cluster IPs.
func svc(ns, name, port string, proto v1.Protocol, portNum uint16, clusterIPs ...string) *proxier.ServicePort {
	sp := &proxier.ServicePort{Name: spn(ns, name, port, proto), Protocol: proto, Port: portNum}
	for _, ip := range clusterIPs {
		sp.ClusterIPs = append(sp.ClusterIPs, netip.MustParseAddr(ip))
	}
	return sp
}

func with(sp *proxier.ServicePort, opts ...svcOpt) *proxier.ServicePort {
	for _, o := range opts {
		o(sp)
	}
	return sp
}

func nodePort(p uint16) svcOpt { return func(sp *proxier.ServicePort) { sp.NodePort = p } }

func externalIPs(ips ...string) svcOpt {
	return func(sp *proxier.ServicePort) {
		for _, ip := range ips {
			sp.ExternalIPs = append(sp.ExternalIPs, netip.MustParseAddr(ip))
		}
	}
}

func lbIPs(ips ...string) svcOpt {
	return func(sp *proxier.ServicePort) {
		for _, ip := range ips {
			sp.LoadBalancerIPs = append(sp.LoadBalancerIPs, netip.MustParseAddr(ip))
		}
	}
}

func sourceRangesOpt(cidrs ...string) svcOpt {
	return func(sp *proxier.ServicePort) {
		for _, c := range cidrs {
			sp.LoadBalancerSourceRanges = append(sp.LoadBalancerSourceRanges, netip.MustParsePrefix(c))
		}
	}
}

func affinity(seconds int32) svcOpt {
	return func(sp *proxier.ServicePort) { sp.AffinityTimeoutSeconds = seconds }
}

func etpLocal(hcPort uint16) svcOpt {
	return func(sp *proxier.ServicePort) { sp.ExternalPolicyLocal, sp.HealthCheckNodePort = true, hcPort }
}

func itpLocal() svcOpt { return func(sp *proxier.ServicePort) { sp.InternalPolicyLocal = true } }

type epOpt func(*proxier.Endpoint)

// ep builds a ready, serving endpoint on another node.
func ep(ipPort string, opts ...epOpt) proxier.Endpoint {
	ap := netip.MustParseAddrPort(ipPort)
	e := proxier.Endpoint{IP: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true, NodeName: "node-b"}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func local(e *proxier.Endpoint) { e.IsLocal, e.NodeName = true, testNode }

func terminating(e *proxier.Endpoint) { e.Ready, e.Serving, e.Terminating = false, true, true }

func notReady(e *proxier.Endpoint) { e.Ready, e.Serving = false, false }

// stateOf builds a State; eps maps each service port to its endpoints.
func stateOf(node []string, sps []*proxier.ServicePort, eps map[proxier.ServicePortName][]proxier.Endpoint) *proxier.State {
	st := &proxier.State{
		Services:  map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node:      proxier.NodeInfo{Name: testNode},
	}
	for _, a := range node {
		st.Node.Addresses = append(st.Node.Addresses, netip.MustParseAddr(a))
	}
	for _, sp := range sps {
		st.Services[sp.Name] = sp
	}
	for n, e := range eps {
		st.Endpoints[n] = e
	}
	return st
}

func testConfig() *Config {
	return &Config{
		Families:      []v1.IPFamily{v1.IPv4Protocol},
		LocalDetector: proxier.DetectByClusterCIDRs(netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")),
	}
}

func mustPrefixes(cidrs ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		out = append(out, netip.MustParsePrefix(c))
	}
	return out
}
