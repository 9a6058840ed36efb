package userspace

import (
	"bytes"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// renderConfig is what rendering one family's rules needs besides the
// plans and the proxy ports.
type renderConfig struct {
	family v1.IPFamily
	// listenIP: when specified, traffic from outside is DNATed here
	// instead of REDIRECTed.
	listenIP netip.Addr
	// hostIP: node-originated traffic is DNATed here; invalid means
	// REDIRECT (to loopback) as a last resort.
	hostIP netip.Addr
	// local is the local-traffic detector's match (--detect-local-mode):
	// it tells pod traffic apart; zero when nothing is local.
	local proxier.LocalMatch
	// nodePods is this node's own pod CIDR (Node spec.podCIDRs); invalid
	// when the node has none.
	nodePods netip.Prefix
	// nodePortPrefixes restrict NodePorts (--nodeport-addresses); nil
	// means every local address.
	nodePortPrefixes []netip.Prefix
	// mark: set by mangle PREROUTING when a proxy holds the destination's
	// transparent socket; masqMark: set on what the fallback DNATs.
	mark, masqMark uint32
	// fallback: sentinels mark live proxies and unmarked traffic is
	// DNATed straight to the endpoints (Config.RestartFallback); without
	// it, traffic from outside is REDIRECTed unconditionally.
	fallback bool
	// handoff: the proxy is going away (Close): every service address
	// is DNATed straight to its endpoints, from outside and from the
	// node, until the next daemon's first sync REDIRECTs again.
	handoff bool
}

// dest is one way of addressing a service port.
type dest struct {
	addr   netip.Addr     // invalid for a NodePort: any local address
	port   uint16         // service port or NodePort
	what   string         // for comments: "cluster IP", "nodePort", ...
	ranges []netip.Prefix // allowed sources (loadBalancerSourceRanges); nil: any
	within netip.Prefix   // NodePort: local addresses in this prefix only; invalid: any
}

// ruleSet collects one family's rules, chain by chain. Rendering is pure.
type ruleSet struct {
	rc    renderConfig
	ports map[socketKey]uint16
	rules map[string][]string // chain -> "-A CHAIN ..." lines
}

// render returns the iptables-restore payload (nat, filter and mangle
// sections) that sends every planned destination to its proxy socket
// while the proxy runs, and straight to the endpoints while it does not,
// or refuses or drops it.
func render(rc renderConfig, plans []servicePlan, ports map[socketKey]uint16) []byte {
	rs := &ruleSet{rc: rc, ports: ports, rules: map[string][]string{}}
	rs.marks()
	for i := range plans {
		rs.service(&plans[i])
	}
	rs.add(chainMasq, []string{"-m", "mark", "--mark", markArg(rc.masqMark),
		"-m", "comment", "--comment", "userspace proxy: kernel fallback", "-j", "MASQUERADE"})
	return rs.payload()
}

// marks writes the mangle rules that mark packets for the proxy's
// transparent sockets: the sentinels on service addresses (so nat sends
// the connection to the proxy) and the connections the proxy opened from
// a client's address (so policy routing delivers the endpoint's replies
// here). Flows the fallback DNATed keep going to their endpoint even once
// a proxy listens again. NodePort sentinels, bound to the wildcard
// address, are matched per port below (service).
func (rs *ruleSet) marks() {
	rs.add(chainMark, []string{"-m", "conntrack", "--ctstate", "DNAT",
		"-m", "comment", "--comment", "NATed flows keep their path", "-j", "RETURN"})
	for _, proto := range []string{"tcp", "udp"} {
		rs.add(chainMark, []string{"-p", proto, "-m", "socket", "--transparent",
			"-m", "comment", "--comment", "userspace proxy socket", "-j", "MARK", "--set-xmark", markArg(rs.rc.mark)})
	}
}

// markArg is "mark/mark", the form iptables-save prints.
func markArg(m uint32) string {
	return "0x" + strconv.FormatUint(uint64(m), 16) + "/0x" + strconv.FormatUint(uint64(m), 16)
}

func (rs *ruleSet) service(p *servicePlan) {
	sp := p.sp
	clusterIP, _ := sp.ClusterIP(p.family)
	rs.internalDest(p, dest{addr: clusterIP.Unmap(), port: sp.Port, what: "cluster IP"})
	for _, ip := range addrsOfFamily(sp.ExternalIPs, p.family) {
		rs.externalDest(p, dest{addr: ip, port: sp.Port, what: "external IP"})
	}
	ranges := prefixesOfFamily(sp.LoadBalancerSourceRanges, p.family)
	for _, ip := range addrsOfFamily(sp.LoadBalancerIPs, p.family) {
		rs.externalDest(p, dest{addr: ip, port: sp.Port, what: "loadbalancer IP", ranges: ranges})
	}
	if sp.NodePort != 0 {
		for _, within := range nodePortScopes(rs.rc.nodePortPrefixes) {
			d := dest{port: sp.NodePort, what: "nodePort", within: within}
			if rs.rc.fallback {
				rs.add(chainMark, append(rs.match(p, d, source{}, "", true),
					"-m", "socket", "--transparent", "--nowildcard", "-j", "MARK", "--set-xmark", markArg(rs.rc.mark)))
			}
			rs.externalDest(p, d)
		}
	}
}

// internalDest: the cluster IP, from anywhere, reaches the internal
// selection.
func (rs *ruleSet) internalDest(p *servicePlan, d dest) {
	if len(p.internal) == 0 {
		rs.refuse(p, d)
		return
	}
	rs.redirect(p, d, source{}, internalTraffic, false, "")
	rs.redirect(p, d, source{}, internalTraffic, true, "")
}

// localPods matches the pods whose traffic to external destinations is
// short-circuited. A source-CIDR detector is narrowed to this node's own
// pods when its pod CIDR is known: a pod on another node reaching this
// node's NodePort is external traffic, as upstream's e2e suite expects
// (the kernel modes' short-circuit for it only ever "works" when the
// endpoint answers through this node, and the proxy would always make it
// work). An interface detector only ever sees this node's pods.
func (rc *renderConfig) localPods() proxier.LocalMatch {
	if rc.local.CIDR.IsValid() && rc.nodePods.IsValid() {
		return proxier.LocalMatch{CIDR: rc.nodePods}
	}
	return rc.local
}

// source restricts a rule to packets from prefix (if valid) that came in
// on iif (if set; "name+" for a prefix, as iptables writes it).
type source struct {
	prefix netip.Prefix
	iif    string
}

// podSource is the part of src that the local match calls pods: the
// overlap with a CIDR, or src on the pod interface(s); ok is false when
// no pod can be in src.
func podSource(src netip.Prefix, local proxier.LocalMatch) (source, bool) {
	switch {
	case local.CIDR.IsValid():
		p, ok := intersect(src, local.CIDR)
		return source{prefix: p}, ok
	case local.Prefix:
		return source{prefix: src, iif: local.Interface + "+"}, true
	case local.Interface != "":
		return source{prefix: src, iif: local.Interface}, true
	}
	return source{}, false
}

// externalDest: traffic from outside reaches the external selection.
// With externalTrafficPolicy Local, the node's own traffic and pod
// traffic reach the internal selection instead (kube-proxy's short-circuit
// for pod and LOCAL sources). Whatever is not redirected is refused or
// dropped by the filter chain.
func (rs *ruleSet) externalDest(p *servicePlan, d dest) {
	hostKind, hostEPs := externalTraffic, p.external
	if p.sp.ExternalPolicyLocal {
		hostKind, hostEPs = internalTraffic, p.internal
	}
	localPods := rs.rc.localPods()
	podsInternal := p.split && p.sp.ExternalPolicyLocal && localPods.IsImplemented() && len(p.internal) > 0
	for _, src := range sources(d.ranges) {
		if len(hostEPs) > 0 {
			rs.redirect(p, d, source{prefix: src}, hostKind, true, "")
		}
		if pods, ok := podSource(src, localPods); podsInternal && ok {
			rs.redirect(p, d, pods, internalTraffic, false, "from pods")
		}
		if len(p.external) > 0 {
			rs.redirect(p, d, source{prefix: src}, externalTraffic, false, "")
		}
	}
	switch {
	case len(p.external) == 0:
		rs.refuse(p, d)
	case len(d.ranges) > 0:
		rs.filter(p, d, "DROP", "source not in loadBalancerSourceRanges")
	}
}

// redirect sends d (from src, if valid) to the proxy port serving kind:
// REDIRECT (or DNAT to the listen IP) for traffic from outside the node
// when the proxy's sentinel socket marked it, DNAT to the host IP for
// node-originated traffic. Unmarked traffic from outside (no proxy
// running) goes to the fallback.
func (rs *ruleSet) redirect(p *servicePlan, d dest, src source, kind trafficKind, host bool, note string) {
	port := rs.ports[p.key(kind)]
	chain := chainPortalsContainer
	switch {
	case host && d.addr.IsValid():
		chain = chainPortalsHost
	case host:
		chain = chainNodePortHost
	case !d.addr.IsValid():
		chain = chainNodePortContainer
	}
	to := rs.rc.listenIP
	if host {
		to = rs.rc.hostIP
	}
	target := []string{"-j", "REDIRECT", "--to-ports", strconv.Itoa(int(port))}
	if to.IsValid() && !to.IsUnspecified() {
		target = []string{"-j", "DNAT", "--to-destination", netip.AddrPortFrom(to, port).String()}
	}
	match := rs.match(p, d, src, note, false)
	if rs.rc.handoff {
		rs.fallback(chain, p, d, src, kind, note)
		return
	}
	if host || !rs.rc.fallback {
		rs.add(chain, append(match, target...))
		return
	}
	rs.add(chain, slices.Concat(match, []string{"-m", "mark", "--mark", markArg(rs.rc.mark)}, target))
	rs.fallback(chain, p, d, src, kind, note)
}

// fallback DNATs d (from src) straight to the endpoints of kind, at
// random as the iptables mode does, for connections that arrive while no
// proxy runs (restarts). Like the proxy, it hides the client behind the
// node (masquerade), except for the external traffic of
// externalTrafficPolicy Local, which keeps the client's address as the
// proxy does with Transparent (its endpoints are local).
func (rs *ruleSet) fallback(chain string, p *servicePlan, d dest, src source, kind trafficKind, note string) {
	eps := p.internal
	if kind == externalTraffic {
		eps = p.external
	}
	note = strings.TrimSpace(note + " fallback")
	match := rs.match(p, d, src, note, false)
	if kind == internalTraffic || !p.sp.ExternalPolicyLocal {
		rs.add(chain, append(slices.Clone(match), "-j", "MARK", "--set-xmark", markArg(rs.rc.masqMark)))
	}
	for i, ep := range eps {
		a := slices.Clone(match)
		if n := len(eps) - i; n > 1 {
			a = append(a, "-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(1/float64(n), 'f', 10, 64))
		}
		rs.add(chain, append(a, "-j", "DNAT", "--to-destination", ep.String()))
	}
}

// refuse rejects new connections to d when no endpoint is usable at all,
// and drops them when a Local policy leaves none on this node (as
// kube-proxy does, so that load balancers' health checks steer away).
func (rs *ruleSet) refuse(p *servicePlan, d dest) {
	if p.hasAny {
		rs.filter(p, d, "DROP", "has no local endpoints")
		return
	}
	rs.filter(p, d, "REJECT", "has no endpoints")
}

func (rs *ruleSet) filter(p *servicePlan, d dest, verdict, note string) {
	rs.add(chainFilter, append(rs.match(p, d, source{}, note, true), "-j", verdict))
}

// match selects the packets of p addressed to d, from src (in
// iptables-save's order: -s, -d, -i, -p).
func (rs *ruleSet) match(p *servicePlan, d dest, src source, note string, filter bool) []string {
	var a []string
	if src.prefix.IsValid() {
		a = append(a, "-s", src.prefix.String())
	}
	if d.addr.IsValid() {
		a = append(a, "-d", netip.PrefixFrom(d.addr, d.addr.BitLen()).String())
	}
	if d.within.IsValid() {
		a = append(a, "-d", d.within.String())
	}
	if src.iif != "" {
		a = append(a, "-i", src.iif)
	}
	proto := strings.ToLower(string(p.sp.Protocol))
	comment := p.sp.Name.String() + " " + d.what
	if note != "" {
		comment += " " + note
	}
	a = append(a, "-p", proto, "-m", "comment", "--comment", comment)
	if filter && !d.addr.IsValid() {
		// The nat NodePort chains are jumped to for local destinations
		// only; the filter chain sees every destination.
		a = append(a, "-m", "addrtype", "--dst-type", "LOCAL")
	}
	return append(a, "-m", proto, "--dport", strconv.Itoa(int(d.port)))
}

func (rs *ruleSet) add(chain string, args []string) {
	rs.rules[chain] = append(rs.rules[chain], "-A "+chain+" "+joinArgs(args))
}

// payload declares (and so flushes) every chain of the backend and
// writes their rules.
func (rs *ruleSet) payload() []byte {
	var b bytes.Buffer
	for _, t := range ownedTables() {
		b.WriteString("*" + t.table + "\n")
		for _, c := range t.chains {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range t.chains {
			for _, l := range rs.rules[c] {
				b.WriteString(l + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes()
}

// joinArgs joins rule arguments, quoting those with spaces the way
// iptables-restore reads them.
func joinArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.ContainsAny(a, " \t") {
			q[i] = `"` + a + `"`
		}
	}
	return strings.Join(q, " ")
}

// sources is the list of source restrictions: one "any" (invalid) prefix
// when there are no ranges.
func sources(ranges []netip.Prefix) []netip.Prefix {
	if len(ranges) == 0 {
		return []netip.Prefix{{}}
	}
	return ranges
}

// intersect returns the overlap of two prefixes (an invalid a means
// "anything"); ok is false when they are disjoint or b is invalid.
func intersect(a, b netip.Prefix) (netip.Prefix, bool) {
	switch {
	case !b.IsValid():
		return netip.Prefix{}, false
	case !a.IsValid():
		return b, true
	case a.Bits() >= b.Bits() && b.Contains(a.Addr()):
		return a, true
	case b.Bits() >= a.Bits() && a.Contains(b.Addr()):
		return b, true
	}
	return netip.Prefix{}, false
}

func addrsOfFamily(addrs []netip.Addr, fam v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if a = a.Unmap(); familyOf(a) == fam {
			out = append(out, a)
		}
	}
	return out
}

func prefixesOfFamily(ps []netip.Prefix, fam v1.IPFamily) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if familyOf(p.Addr()) == fam {
			out = append(out, p.Masked())
		}
	}
	return out
}
