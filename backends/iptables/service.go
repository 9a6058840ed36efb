package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// serviceRenderer renders service ports of one family. It caches the
// probability matches and keeps scratch space from one service port to
// the next; it is not shared between goroutines.
type serviceRenderer struct {
	fc            *familyConfig
	node          proxier.NodeInfo
	nodeAddrs     []netip.Addr
	local         proxier.LocalMatch
	probabilities []string

	w ruleWriter
	// hashIn holds what a chain name hashes; seps and sepIndex, the
	// view's endpoint chain names.
	hashIn   []byte
	seps     []string
	sepIndex []sepChain
}

func newServiceRenderer(fc *familyConfig, node proxier.NodeInfo) *serviceRenderer {
	return &serviceRenderer{fc: fc, node: node, nodeAddrs: nodeAddrs(node, fc.family), local: fc.localDetector.Match(fc.family, node)}
}

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

// render renders one service port, or returns nil when it has nothing in
// this family.
func (r *serviceRenderer) render(sp *proxier.ServicePort, eps []proxier.Endpoint) *servicePortRules {
	v := r.view(sp, eps)
	if v == nil {
		return nil
	}
	out := &servicePortRules{
		// The endpoint chains, two policy chains, KUBE-EXT and KUBE-FW.
		chains:          make([]*chainRules, 0, len(v.sel.AllReachable)+4),
		noLocalInternal: v.hasEndpoints && !v.hasInternal,
		noLocalExternal: v.hasEndpoints && !v.hasExternal && v.externallyAccessible(),
	}
	r.clusterIPRules(v, out)
	r.externalIPRules(v, out)
	r.loadBalancerRules(v, out)
	r.nodePortRules(v, out)
	r.endpointChains(v, out)
	r.policyChains(v, out)
	r.externalChain(v, out)
	r.firewallChain(v, out)
	return out
}

func (r *serviceRenderer) view(sp *proxier.ServicePort, eps []proxier.Endpoint) *servicePortView {
	if sp == nil {
		return nil
	}
	proto := protocolName(sp.Protocol)
	cip, ok := sp.ClusterIP(r.fc.family)
	if proto == "" || !ok || !cip.IsValid() || sp.Port == 0 {
		return nil
	}
	v := &servicePortView{
		sp: sp, name: sp.Name.String(), proto: proto, clusterIP: cip.Unmap(),
		externalIPs:  proxier.AddrsOfFamily(sp.ExternalIPs, r.fc.family),
		lbIPs:        proxier.AddrsOfFamily(sp.LoadBalancerIPs, r.fc.family),
		sourceRanges: proxier.PrefixesOfFamily(sp.LoadBalancerSourceRanges, r.fc.family),
		sel:          proxier.SelectEndpoints(sp, validEndpoints(eps), r.node, r.fc.family),
	}
	r.nameChains(v)
	v.decide()
	return v
}

// nameChains names the port's chains and those of its reachable
// endpoints, hashing in the renderer's buffer what hashKey and
// endpointChainName would build as strings.
func (r *serviceRenderer) nameChains(v *servicePortView) {
	r.hashIn = append(append(r.hashIn[:0], v.name...), lowerProtocol(v.sp.Name.Protocol)...)
	v.chains = chainsForKey(r.hashIn)
	r.seps, r.sepIndex = r.seps[:0], r.sepIndex[:0]
	key := len(r.hashIn)
	for _, ep := range v.sel.AllReachable {
		r.hashIn = endpointAddr(ep).AppendTo(r.hashIn[:key])
		sep := hashedName(prefixEndpoint, r.hashIn)
		r.seps = append(r.seps, sep)
		r.sepIndex = append(r.sepIndex, sepChain{key: ep.Key(), chain: sep})
	}
	slices.SortFunc(r.sepIndex, func(a, b sepChain) int { return a.key.Compare(b.key) })
	v.seps, v.sepIndex = r.seps, r.sepIndex
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

// probability is the statistic match of a jump that takes 1/n of the
// traffic reaching it.
func (r *serviceRenderer) probability(n int) string {
	for len(r.probabilities) <= n {
		// kube-proxy's computeProbability.
		p := 1.0 / float64(len(r.probabilities))
		r.probabilities = append(r.probabilities, fmt.Sprintf("-m statistic --mode random --probability %0.10f", p))
	}
	return r.probabilities[n]
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
