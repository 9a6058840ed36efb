package iptables

import (
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// servicePortView holds what the rules of one service port are built from:
// its family-filtered addresses, its endpoint selection and the decisions
// kube-proxy's syncProxyRules makes from them.
type servicePortView struct {
	sp           *proxier.ServicePort
	name         string // "ns/name:port"
	proto        string // "tcp", "udp", "sctp"
	clusterIP    netip.Addr
	externalIPs  []netip.Addr
	lbIPs        []netip.Addr
	sourceRanges []netip.Prefix
	chains       servicePortChains
	sel          proxier.EndpointSelection
	// seps are the KUBE-SEP chains of sel.AllReachable, in its order;
	// sepIndex, the same sorted by endpoint, for sepOf. Both are the
	// renderer's: valid until its next view.
	seps     []string
	sepIndex []sepChain

	hasEndpoints, hasInternal, hasExternal bool
	usesClusterChain, usesLocalChain       bool
	usesExternalChain, usesFirewallChain   bool
	internalChain, externalPolicyChain     string
}

// sepChain is the KUBE-SEP chain of the endpoint whose Key is key.
type sepChain struct {
	key   netip.AddrPort
	chain string
}

// sepOf returns the KUBE-SEP chain of ep, one of sel.AllReachable. (A
// sorted slice rather than a map: a renderer's map would keep the size
// of its biggest port, and every clear would walk it.)
func (v *servicePortView) sepOf(ep proxier.Endpoint) string {
	i, _ := slices.BinarySearchFunc(v.sepIndex, ep.Key(), func(s sepChain, k netip.AddrPort) int { return s.key.Compare(k) })
	return v.sepIndex[i].chain
}

// decide mirrors kube-proxy: which chains exist and where each kind of
// traffic goes.
func (v *servicePortView) decide() {
	sp, sel := v.sp, &v.sel
	v.hasEndpoints = sel.HasAny
	v.usesClusterChain = len(sel.Cluster) > 0
	v.usesLocalChain = len(sel.Local) > 0 && sp.UsesLocalEndpoints()
	v.internalChain, v.hasInternal = v.chains.cluster, v.hasEndpoints && v.usesClusterChain
	if sp.InternalPolicyLocal {
		v.internalChain, v.hasInternal = v.chains.local, v.usesLocalChain
	}
	v.externalPolicyChain, v.hasExternal = v.chains.cluster, v.hasEndpoints && v.usesClusterChain
	if sp.ExternalPolicyLocal {
		v.externalPolicyChain, v.hasExternal = v.chains.local, v.usesLocalChain
	}
	// The EXT chain exists whenever there are endpoints at all, even if
	// none is reachable by external traffic, for the short-circuit rules
	// of locally originated traffic.
	v.usesExternalChain = v.hasEndpoints && v.externallyAccessible()
	v.usesFirewallChain = v.hasEndpoints && len(v.lbIPs) > 0 && len(v.sourceRanges) > 0
}

// externallyAccessible reports whether the port has a NodePort, or an
// external or load-balancer IP of this family.
func (v *servicePortView) externallyAccessible() bool {
	return v.sp.NodePort != 0 || len(v.externalIPs) > 0 || len(v.lbIPs) > 0
}

// shortCircuitChain is where locally originated traffic to an external
// destination goes under eTP=Local: the Cluster policy chain, as in
// kube-proxy. When the shared selection gives no Cluster endpoints (it
// does not compute them for iTP=Local+eTP=Local), the Local chain is the
// best valid target; "" means no such rule.
func (v *servicePortView) shortCircuitChain() string {
	switch {
	case v.usesClusterChain:
		return v.chains.cluster
	case v.usesLocalChain:
		return v.chains.local
	}
	return ""
}

// validEndpoints drops endpoints no rule can be written for (no address,
// port 0), copying only when there is one.
func validEndpoints(eps []proxier.Endpoint) []proxier.Endpoint {
	bad := func(e proxier.Endpoint) bool { return !e.IP.IsValid() || e.Port == 0 }
	if !slices.ContainsFunc(eps, bad) {
		return eps
	}
	return slices.DeleteFunc(slices.Clone(eps), bad)
}

func protocolName(p v1.Protocol) string {
	switch p {
	case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		return lowerProtocol(p)
	}
	return ""
}

// lowerProtocol is strings.ToLower(string(p)), without allocating for
// the protocols rules are written for.
func lowerProtocol(p v1.Protocol) string {
	switch p {
	case v1.ProtocolTCP:
		return "tcp"
	case v1.ProtocolUDP:
		return "udp"
	case v1.ProtocolSCTP:
		return "sctp"
	}
	return strings.ToLower(string(p))
}

// endpointAddr is the endpoint's "ip:port" as rules print it, with an
// IPv4-mapped address unmapped.
func endpointAddr(ep proxier.Endpoint) netip.AddrPort {
	return netip.AddrPortFrom(ep.IP.Unmap(), ep.Port)
}
