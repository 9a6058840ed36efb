package iptables

import (
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// This file holds the rules of one service port, in kube-proxy's shape
// (pkg/proxy/iptables syncProxyRules), written in the argument order
// iptables-save prints so a dump of the kernel reads like the render.

// filterVerdict is what the filter table does with traffic to a
// destination that has no endpoint to go to: REJECT when the service has no
// endpoints at all, DROP when a Local policy leaves none on this node.
func (r *serviceRenderer) filterVerdict(v *servicePortView) (target, text string) {
	if !v.hasEndpoints {
		reject := "icmp-port-unreachable"
		if r.fc.family == v1.IPv6Protocol {
			reject = "icmp6-port-unreachable"
		}
		return "REJECT --reject-with " + reject, v.name + " has no endpoints"
	}
	return "DROP", v.name + " has no local endpoints"
}

func (r *serviceRenderer) clusterIPRules(v *servicePortView, out *servicePortRules) {
	if v.hasInternal {
		add(out, sharedNATServices, rule(chainServices, v.match(v.clusterIP, v.name+" cluster IP", v.sp.Port), "-j", v.internalChain))
		return
	}
	target, text := r.filterVerdict(v)
	add(out, sharedFilterServices, rule(chainServices, v.match(v.clusterIP, text, v.sp.Port), "-j", target))
}

func (r *serviceRenderer) externalIPRules(v *servicePortView, out *servicePortRules) {
	for _, ip := range v.externalIPs {
		if v.hasEndpoints {
			add(out, sharedNATServices, rule(chainServices, v.match(ip, v.name+" external IP", v.sp.Port), "-j", v.chains.external))
		}
		if !v.hasExternal {
			// No endpoints at all (REJECT), or none for external traffic
			// (DROP what the EXT chain did not short-circuit).
			target, text := r.filterVerdict(v)
			add(out, sharedFilterExternal, rule(chainExternalServices, v.match(ip, text, v.sp.Port), "-j", target))
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
			add(out, sharedNATServices, rule(chainServices, v.match(ip, v.name+" loadbalancer IP", v.sp.Port), "-j", lbChain))
		}
		if v.usesFirewallChain {
			// Traffic the KUBE-FW chain did not DNAT reaches the filter
			// table still addressed to the LB IP, and is dropped here.
			text := v.name + " traffic not accepted by " + v.chains.firewall
			add(out, sharedFilterFirewall, rule(chainProxyFirewall, v.match(ip, text, v.sp.Port), "-j DROP"))
		}
	}
	if !v.hasExternal {
		target, text := r.filterVerdict(v)
		for _, ip := range v.lbIPs {
			add(out, sharedFilterExternal, rule(chainExternalServices, v.match(ip, text, v.sp.Port), "-j", target))
		}
	}
}

func (r *serviceRenderer) nodePortRules(v *servicePortView, out *servicePortRules) {
	if np := v.sp.NodePort; np != 0 {
		port := " -m " + v.proto + " --dport " + strconv.Itoa(int(np))
		if v.hasEndpoints {
			// NodePorts are not subject to loadBalancerSourceRanges, as in
			// kube-proxy.
			add(out, sharedNATNodePorts, rule(chainNodePorts, "-p "+v.proto, comment(v.name)+port, "-j", v.chains.external))
		}
		if !v.hasExternal {
			target, text := r.filterVerdict(v)
			add(out, sharedFilterExternal, rule(chainExternalServices, "-p "+v.proto, comment(text),
				"-m addrtype --dst-type LOCAL"+port, "-j", target))
		}
	}
	if hc := v.sp.HealthCheckNodePort; hc != 0 {
		// Accept the health check node port whether or not there are
		// local endpoints: the answer tells the LB which nodes to use.
		add(out, sharedFilterNodePorts, rule(chainNodePorts, "-p tcp", comment(v.name+" health check node port"),
			"-m tcp --dport "+strconv.Itoa(int(hc)), "-j ACCEPT"))
	}
}

// endpointChains writes one KUBE-SEP chain per endpoint any traffic may
// reach: a hairpin masquerade rule, then the DNAT (recording the client
// for session affinity).
func (r *serviceRenderer) endpointChains(v *servicePortView, out *servicePortRules) {
	cmt, proto, module := comment(v.name), "-p "+v.proto, "-m "+v.proto
	for _, ep := range v.sel.AllReachable {
		names := v.endpoints[ep.Key()]
		sep := names.chain
		recent := ""
		if v.sp.AffinityTimeoutSeconds > 0 {
			recent = "-m recent --name " + sep + " --set"
		}
		out.chains = append(out.chains, newChain(tableNAT, sep,
			rule(sep, hostArg("-s", ep.IP.Unmap()), cmt, "-j", chainMarkMasq),
			rule(sep, proto, cmt, recent, module, "-j DNAT --to-destination", names.addr)))
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
	c := newChain(tableNAT, name)
	c.rules = make([]string, 0, 1+2*len(eps)) // masquerade, affinity, jumps
	if v.hasInternal && v.internalChain == name {
		m := v.match(v.clusterIP, v.name+" cluster IP", v.sp.Port)
		switch {
		case r.fc.masqueradeAll:
			c.rules = append(c.rules, rule(name, m, "-j", chainMarkMasq))
		case r.fc.clusterCIDR.IsValid():
			// Off-cluster clients reaching a cluster IP (a static route to
			// the service range) may be sent to another node: SNAT them.
			c.rules = append(c.rules, rule(name, "! -s "+r.fc.clusterCIDR.String(), m, "-j", chainMarkMasq))
		}
	}
	if t := v.sp.AffinityTimeoutSeconds; t > 0 {
		for _, ep := range eps {
			names := v.endpoints[ep.Key()]
			c.rules = append(c.rules, rule(name, names.comment,
				"-m recent --name "+names.chain+" --rcheck --seconds "+strconv.Itoa(int(t))+" --reap -j", names.chain))
		}
	}
	for i, ep := range eps {
		stat := ""
		if i < len(eps)-1 {
			// Rule i takes 1/(n-i) of what reaches it: uniform overall.
			stat = "-m statistic --mode random --probability " + r.probability(len(eps)-i)
		}
		names := v.endpoints[ep.Key()]
		c.rules = append(c.rules, rule(name, names.comment, stat, "-j", names.chain))
	}
	return c
}

// externalChain writes KUBE-EXT, where all traffic to NodePorts, external
// IPs and LB IPs goes.
func (r *serviceRenderer) externalChain(v *servicePortView, out *servicePortRules) {
	if !v.usesExternalChain {
		return
	}
	name := v.chains.external
	c := newChain(tableNAT, name)
	if !v.sp.ExternalPolicyLocal {
		// Endpoints may be on another node: masquerade.
		c.rules = append(c.rules, rule(name, comment("masquerade traffic for "+v.name+" external destinations"), "-j", chainMarkMasq))
	} else if short := v.shortCircuitChain(); short != "" {
		// Pods and the node itself reaching an external address are not
		// subject to eTP=Local: they go to any endpoint, as if they had
		// gone out to the load balancer and come back.
		if r.fc.clusterCIDR.IsValid() {
			c.rules = append(c.rules, rule(name, "-s "+r.fc.clusterCIDR.String(),
				comment("pod traffic for "+v.name+" external destinations"), "-j", short))
		}
		// The node's own traffic has a local source address and needs SNAT.
		c.rules = append(c.rules,
			rule(name, comment("masquerade LOCAL traffic for "+v.name+" external destinations"), "-m addrtype --src-type LOCAL -j", chainMarkMasq),
			rule(name, comment("route LOCAL traffic for "+v.name+" external destinations"), "-m addrtype --src-type LOCAL -j", short))
	}
	if v.hasExternal {
		c.rules = append(c.rules, rule(name, "-j", v.externalPolicyChain))
	}
	out.chains = append(out.chains, c)
}

// firewallChain writes KUBE-FW for loadBalancerSourceRanges: allowed
// sources go on to KUBE-EXT; the rest falls through undNATed and is
// dropped by filter KUBE-PROXY-FIREWALL.
func (r *serviceRenderer) firewallChain(v *servicePortView, out *servicePortRules) {
	if !v.usesFirewallChain {
		return
	}
	name := v.chains.firewall
	c := newChain(tableNAT, name)
	cmt := comment(v.name + " loadbalancer IP")
	allowNode := false
	for _, p := range v.sourceRanges {
		c.rules = append(c.rules, rule(name, "-s "+p.String(), cmt, "-j", v.chains.external))
		allowNode = allowNode || slices.ContainsFunc(r.nodeAddrs, p.Contains)
	}
	if allowNode {
		// A VIP-style LB IP is often a local address: the node's own
		// requests to it loop back with the LB IP as source.
		for _, ip := range v.lbIPs {
			c.rules = append(c.rules, rule(name, hostArg("-s", ip), cmt, "-j", v.chains.external))
		}
	}
	c.rules = append(c.rules, rule(name, comment("other traffic to "+v.name+" will be dropped by KUBE-PROXY-FIREWALL")))
	out.chains = append(out.chains, c)
}

func add(out *servicePortRules, s shared, line string) {
	out.shared[s] = append(out.shared[s], line)
}
