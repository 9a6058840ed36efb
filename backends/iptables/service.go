package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// serviceRenderer renders service ports of one family. It caches the
// probability strings; it is not shared between goroutines.
type serviceRenderer struct {
	fc            *familyConfig
	node          proxier.NodeInfo
	nodeAddrs     []netip.Addr
	probabilities []string
}

func newServiceRenderer(fc *familyConfig, node proxier.NodeInfo) *serviceRenderer {
	return &serviceRenderer{fc: fc, node: node, nodeAddrs: nodeAddrs(node, fc.family)}
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
	endpoints    map[netip.AddrPort]endpointNames

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
		chains:       chainsFor(sp.Name),
		sel:          proxier.SelectEndpoints(sp, validEndpoints(eps), r.node, r.fc.family),
	}
	v.endpoints = make(map[netip.AddrPort]endpointNames, len(v.sel.AllReachable))
	key := hashKey(sp.Name)
	for _, ep := range v.sel.AllReachable {
		addr := endpointString(ep)
		v.endpoints[ep.Key()] = endpointNames{
			chain:   hashedName(prefixEndpoint, key, addr),
			addr:    addr,
			comment: `-m comment --comment "` + v.name + " -> " + addr + `"`,
		}
	}
	v.decide()
	return v
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

// match is the destination/protocol/port match shared by the dispatch
// rules: "-d ip/32 -p tcp <comment> -m tcp --dport N".
func (v *servicePortView) match(dst netip.Addr, text string, port uint16) string {
	d := ""
	if dst.IsValid() {
		d = hostArg("-d", dst) + " "
	}
	return d + "-p " + v.proto + " " + comment(text) + " -m " + v.proto + " --dport " + strconv.Itoa(int(port))
}

func (r *serviceRenderer) probability(n int) string {
	for len(r.probabilities) <= n {
		// kube-proxy's computeProbability.
		r.probabilities = append(r.probabilities, fmt.Sprintf("%0.10f", 1.0/float64(len(r.probabilities))))
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
		return strings.ToLower(string(p))
	}
	return ""
}

// endpointNames are the strings an endpoint's rules use, built once per
// endpoint: its KUBE-SEP chain, "ip:port", and the comment of the rules
// that jump to it ("ns/name:port -> ip:port").
type endpointNames struct {
	chain, addr, comment string
}

// hostArg is "<flag> ip/32" ("ip/128" for IPv6) in one allocation.
func hostArg(flag string, a netip.Addr) string {
	var buf [64]byte
	b := append(append(buf[:0], flag...), ' ')
	b = a.AppendTo(b)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(a.BitLen()), 10)
	return string(b)
}

// endpointString is "ip:port" ("[ip]:port" for IPv6), with IPv4-mapped
// addresses unmapped.
func endpointString(ep proxier.Endpoint) string {
	return netip.AddrPortFrom(ep.IP.Unmap(), ep.Port).String()
}
