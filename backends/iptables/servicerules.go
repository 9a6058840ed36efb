package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/nfacct"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// This file holds the rules of one service port, in kube-proxy's shape
// (pkg/proxy/iptables syncProxyRules), written in the argument order
// iptables-save prints so a dump of the kernel reads like the render.

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

// filterVerdict is what the filter table does with traffic to a
// destination that has no endpoint to go to: REJECT when the service has no
// endpoints at all, DROP when a Local policy leaves none on this node. The
// rule's comment is the port's name followed by why.
func (r *serviceRenderer) filterVerdict(v *servicePortView) (target, why string) {
	if !v.hasEndpoints {
		reject := "icmp-port-unreachable"
		if r.fc.family == v1.IPv6Protocol {
			reject = "icmp6-port-unreachable"
		}
		return "REJECT --reject-with " + reject, " has no endpoints"
	}
	return "DROP", " has no local endpoints"
}

func (r *serviceRenderer) clusterIPRules(v *servicePortView, out *servicePortRules) {
	if v.hasInternal {
		r.w.rule(chainServices).match(v, v.clusterIP, v.name, " cluster IP").args("-j", v.internalChain)
		r.add(out, sharedNATServices)
		return
	}
	target, why := r.filterVerdict(v)
	r.w.rule(chainServices).match(v, v.clusterIP, v.name, why).args("-j", target)
	r.add(out, sharedFilterServices)
}

func (r *serviceRenderer) externalIPRules(v *servicePortView, out *servicePortRules) {
	for _, ip := range v.externalIPs {
		if v.hasEndpoints {
			r.w.rule(chainServices).match(v, ip, v.name, " external IP").args("-j", v.chains.external)
			r.add(out, sharedNATServices)
		}
		if !v.hasExternal {
			// No endpoints at all (REJECT), or none for external traffic
			// (DROP what the EXT chain did not short-circuit).
			target, why := r.filterVerdict(v)
			r.w.rule(chainExternalServices).match(v, ip, v.name, why).args("-j", target)
			r.add(out, sharedFilterExternal)
		}
	}
}

func (r *serviceRenderer) loadBalancerRules(v *servicePortView, out *servicePortRules) {
	lbChain := v.chains.external
	if v.usesFirewallChain {
		lbChain = v.chains.firewall
	}
	for _, ip := range v.lbIPs {
		if v.hasEndpoints {
			r.w.rule(chainServices).match(v, ip, v.name, " loadbalancer IP").args("-j", lbChain)
			r.add(out, sharedNATServices)
		}
		if v.usesFirewallChain {
			// Traffic the KUBE-FW chain did not DNAT reaches the filter
			// table still addressed to the LB IP, and is dropped here.
			r.w.rule(chainProxyFirewall).match(v, ip, v.name, " traffic not accepted by ", v.chains.firewall).args("-j DROP")
			r.add(out, sharedFilterFirewall)
		}
	}
	if !v.hasExternal {
		target, why := r.filterVerdict(v)
		for _, ip := range v.lbIPs {
			r.w.rule(chainExternalServices).match(v, ip, v.name, why).args("-j", target)
			r.add(out, sharedFilterExternal)
		}
	}
}

func (r *serviceRenderer) nodePortRules(v *servicePortView, out *servicePortRules) {
	if np := v.sp.NodePort; np != 0 {
		if v.hasEndpoints {
			if r.fc.nfacct && r.fc.localhostNodePorts {
				// Counted for kube-proxy's localhost NodePorts metric.
				// In iptables-save's order, so verification reads it back equal.
				r.w.rule(chainNodePorts, "-d 127.0.0.0/8 -p", v.proto).comment(v.name).dport(v.proto, np).
					args("-m nfacct --nfacct-name", nfacct.LocalhostNodePortsAccepted, "-j", v.chains.external)
				r.add(out, sharedNATNodePorts)
			}
			// NodePorts are not subject to loadBalancerSourceRanges, as in
			// kube-proxy.
			r.w.rule(chainNodePorts, "-p", v.proto).comment(v.name).dport(v.proto, np).args("-j", v.chains.external)
			r.add(out, sharedNATNodePorts)
		}
		if !v.hasExternal {
			target, why := r.filterVerdict(v)
			r.w.rule(chainExternalServices, "-p", v.proto).comment(v.name, why).
				args("-m addrtype --dst-type LOCAL").dport(v.proto, np).args("-j", target)
			r.add(out, sharedFilterExternal)
		}
	}
	if hc := v.sp.HealthCheckNodePort; hc != 0 {
		// Accept the health check node port whether or not there are
		// local endpoints: the answer tells the LB which nodes to use.
		r.w.rule(chainNodePorts, "-p tcp").comment(v.name, " health check node port").dport("tcp", hc).args("-j ACCEPT")
		r.add(out, sharedFilterNodePorts)
	}
}

// endpointChains writes one KUBE-SEP chain per endpoint any traffic may
// reach: a hairpin masquerade rule, then the DNAT (recording the client
// for session affinity). The chains and their rules share one backing
// array each and the rules one string.
func (r *serviceRenderer) endpointChains(v *servicePortView, out *servicePortRules) {
	for i, ep := range v.sel.AllReachable {
		sep, addr := v.seps[i], endpointAddr(ep)
		r.w.rule(sep).host("-s", addr.Addr()).comment(v.name).args("-j", chainMarkMasq)
		r.w.rule(sep, "-p", v.proto).comment(v.name)
		if v.sp.AffinityTimeoutSeconds > 0 {
			r.w.args("-m recent --name", sep, "--set")
		}
		r.w.args("-m", v.proto, "-j DNAT --to-destination").addrPort(addr)
	}
	rules := r.w.lines()
	chains := make([]chainRules, len(v.seps))
	for i, sep := range v.seps {
		chains[i] = makeChain(tableNAT, sep, rules[2*i:2*i+2:2*i+2])
		out.chains = append(out.chains, &chains[i])
	}
}

// policyChains writes KUBE-SVC (Cluster policy endpoints) and KUBE-SVL
// (Local policy endpoints). The chain cluster-IP traffic goes to starts
// with the masquerade rule for traffic from outside the pod network.
func (r *serviceRenderer) policyChains(v *servicePortView, out *servicePortRules) {
	if v.usesClusterChain {
		out.chains = append(out.chains, r.policyChain(v, v.chains.cluster, v.sel.Cluster))
	}
	if v.usesLocalChain {
		out.chains = append(out.chains, r.policyChain(v, v.chains.local, v.sel.Local))
	}
}

func (r *serviceRenderer) policyChain(v *servicePortView, name string, eps []proxier.Endpoint) *chainRules {
	if v.hasInternal && v.internalChain == name {
		switch {
		case r.fc.masqueradeAll:
			r.w.rule(name).match(v, v.clusterIP, v.name, " cluster IP").args("-j", chainMarkMasq)
		case r.local.IsImplemented():
			// Off-cluster clients reaching a cluster IP (a static route to
			// the service range) may be sent to another node: SNAT them.
			// Without a local-traffic detector kube-proxy writes no rule.
			r.w.rule(name).notLocal(r.local, v.clusterIP).match(v, netip.Addr{}, v.name, " cluster IP").args("-j", chainMarkMasq)
		}
	}
	if t := v.sp.AffinityTimeoutSeconds; t > 0 {
		seconds := strconv.Itoa(int(t))
		for _, ep := range eps {
			sep := v.sepOf(ep)
			r.w.rule(name).endpointComment(v.name, endpointAddr(ep)).
				args("-m recent --name", sep, "--rcheck --seconds", seconds, "--reap -j", sep)
		}
	}
	for i, ep := range eps {
		stat := ""
		if i < len(eps)-1 {
			// Rule i takes 1/(n-i) of what reaches it: uniform overall.
			stat = r.probability(len(eps) - i)
		}
		r.w.rule(name).endpointComment(v.name, endpointAddr(ep)).args(stat, "-j", v.sepOf(ep))
	}
	return newChain(tableNAT, name, r.w.lines()...)
}

// externalChain writes KUBE-EXT, where all traffic to NodePorts, external
// IPs and LB IPs goes.
func (r *serviceRenderer) externalChain(v *servicePortView, out *servicePortRules) {
	if !v.usesExternalChain {
		return
	}
	name := v.chains.external
	if !v.sp.ExternalPolicyLocal {
		// Endpoints may be on another node: masquerade.
		r.w.rule(name).comment("masquerade traffic for ", v.name, " external destinations").args("-j", chainMarkMasq)
	} else if short := v.shortCircuitChain(); short != "" {
		// Pods and the node itself reaching an external address are not
		// subject to eTP=Local: they go to any endpoint, as if they had
		// gone out to the load balancer and come back.
		if r.local.IsImplemented() {
			r.w.rule(name).local(r.local, false).
				comment("pod traffic for ", v.name, " external destinations").args("-j", short)
		}
		// The node's own traffic has a local source address and needs SNAT.
		r.w.rule(name).comment("masquerade LOCAL traffic for ", v.name, " external destinations").
			args("-m addrtype --src-type LOCAL -j", chainMarkMasq)
		r.w.rule(name).comment("route LOCAL traffic for ", v.name, " external destinations").
			args("-m addrtype --src-type LOCAL -j", short)
	}
	if v.hasExternal {
		r.w.rule(name, "-j", v.externalPolicyChain)
	}
	out.chains = append(out.chains, newChain(tableNAT, name, r.w.lines()...))
}

// firewallChain writes KUBE-FW for loadBalancerSourceRanges: allowed
// sources go on to KUBE-EXT; the rest falls through undNATed and is
// dropped by filter KUBE-PROXY-FIREWALL.
func (r *serviceRenderer) firewallChain(v *servicePortView, out *servicePortRules) {
	if !v.usesFirewallChain {
		return
	}
	name := v.chains.firewall
	allowNode := false
	for _, p := range v.sourceRanges {
		r.w.rule(name).prefix("-s", p).comment(v.name, " loadbalancer IP").args("-j", v.chains.external)
		allowNode = allowNode || slices.ContainsFunc(r.nodeAddrs, p.Contains)
	}
	if allowNode {
		// A VIP-style LB IP is often a local address: the node's own
		// requests to it loop back with the LB IP as source.
		for _, ip := range v.lbIPs {
			r.w.rule(name).host("-s", ip).comment(v.name, " loadbalancer IP").args("-j", v.chains.external)
		}
	}
	r.w.rule(name).comment("other traffic to ", v.name, " will be dropped by KUBE-PROXY-FIREWALL")
	out.chains = append(out.chains, newChain(tableNAT, name, r.w.lines()...))
}

// add adds the rules written since the last flush to a top-level chain.
func (r *serviceRenderer) add(out *servicePortRules, s shared) {
	out.shared[s] = r.w.appendLines(out.shared[s])
}
