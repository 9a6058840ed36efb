package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Chains. The nat chains and sets follow kube-proxy's IPVS mode; the
// filter chains kube-proxy's iptables mode (REJECT / DROP per service).
const (
	chainServices         = "KUBE-SERVICES"
	chainExternalServices = "KUBE-EXTERNAL-SERVICES"
	chainPostrouting      = "KUBE-POSTROUTING"
	chainMarkMasq         = "KUBE-MARK-MASQ"
	chainNodePort         = "KUBE-NODE-PORT"
	chainLoadBalancer     = "KUBE-LOAD-BALANCER"
	chainInternal         = "KUBE-IPVS-INTERNAL"
	chainForward          = "KUBE-FORWARD"
	chainSourceRanges     = "KUBE-SOURCE-RANGES-FIREWALL"
)

var (
	natChains    = []string{chainServices, chainPostrouting, chainMarkMasq, chainNodePort, chainLoadBalancer, chainInternal}
	filterChains = []string{chainSourceRanges, chainServices, chainExternalServices, chainForward}
)

// jump is a rule in a built-in chain that enters one of ours.
type jump struct {
	table, from string
	args        []string
}

// to is the chain the jump enters.
func (j jump) to() string { return j.args[len(j.args)-1] }

// insertLine is the restore line that puts the jump first in its chain.
func (j jump) insertLine() string {
	q := make([]string, len(j.args))
	for i, a := range j.args {
		q[i] = quote(a)
	}
	return "-I " + j.from + " 1 " + strings.Join(q, " ")
}

func jumps() []jump {
	newConn := []string{"-m", "conntrack", "--ctstate", "NEW"}
	j := func(table, from, comment, to string, extra ...string) jump {
		args := append(append([]string(nil), extra...), "-m", "comment", "--comment", comment, "-j", to)
		return jump{table: table, from: from, args: args}
	}
	return []jump{
		j("nat", "PREROUTING", "kubernetes service portals", chainServices),
		j("nat", "OUTPUT", "kubernetes service portals", chainServices),
		j("nat", "POSTROUTING", "kubernetes postrouting rules", chainPostrouting),
		j("filter", "INPUT", "kubernetes load balancer firewall", chainSourceRanges, newConn...),
		j("filter", "INPUT", "kubernetes service portals", chainServices, newConn...),
		j("filter", "INPUT", "kubernetes externally-visible service portals", chainExternalServices, newConn...),
		j("filter", "OUTPUT", "kubernetes service portals", chainServices, newConn...),
		j("filter", "OUTPUT", "kubernetes externally-visible service portals", chainExternalServices, newConn...),
		j("filter", "FORWARD", "kubernetes forwarding rules", chainForward),
	}
}

// quote quotes a rule argument for iptables-restore when it has blanks.
func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"\\") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func hostPrefix(a netip.Addr) string {
	return netip.PrefixFrom(a, a.BitLen()).String()
}

func markArg(v, mask uint32) string { return fmt.Sprintf("%#x/%#x", v, mask) }

// portMatch is "-p tcp" + comment + "-m tcp --dport N".
func portMatch(p v1.Protocol, port uint16, comment string) string {
	proto := strings.ToLower(string(p))
	return fmt.Sprintf("-p %s -m comment --comment %s -m %s --dport %d", proto, quote(comment), proto, port)
}

// renderRules writes the port's filter rules (REJECT without endpoints,
// DROP without local endpoints) and nat rules (the internal-traffic
// fwmark).
func renderRules(rc *renderContext, r *portRender, sp *proxier.ServicePort, s selected, mark uint32) {
	name := sp.Name.String()
	ext, lb := externalAddrs(rc.family, sp)
	external := slices.Concat(ext, lb)
	clusterRule := func(msg, verdict string) {
		if ip, ok := sp.ClusterIP(rc.family); ok {
			r.filter = append(r.filter, "-A "+chainServices+" -d "+hostPrefix(ip.Unmap())+" "+portMatch(sp.Protocol, sp.Port, msg)+" -j "+verdict)
		}
	}
	if !s.sel.HasAny {
		clusterRule(name+" has no endpoints", "REJECT")
		r.filter = append(r.filter, externalRules(sp, external, "", name+" has no endpoints", "REJECT")...)
	}
	if s.sel.HasAny && len(s.internal) == 0 { // internalTrafficPolicy Local, none here
		msg := name + " has no local endpoints"
		clusterRule(msg, "DROP")
		if mark != 0 {
			r.filter = append(r.filter, fmt.Sprintf("-A %s -m mark --mark %s -m comment --comment %s -j DROP",
				chainServices, markArg(mark, rc.markMask), quote(msg)))
		}
	}
	if s.sel.HasAny && len(s.external) == 0 && sp.ExternallyAccessible() { // externalTrafficPolicy Local, none here
		noMark := "-m mark --mark " + markArg(0, rc.markMask) + " "
		r.filter = append(r.filter, externalRules(sp, external, noMark, name+" has no local endpoints", "DROP")...)
	}
	if mark != 0 {
		r.nat = internalMarkRules(rc, sp, external, mark)
	}
}

// externalRules are one rule per external IP / LB IP and one for the
// NodePort (any local address), all in KUBE-EXTERNAL-SERVICES.
func externalRules(sp *proxier.ServicePort, external []netip.Addr, extra, msg, verdict string) []string {
	var out []string
	for _, ip := range external {
		out = append(out, "-A "+chainExternalServices+" -d "+hostPrefix(ip)+" "+extra+portMatch(sp.Protocol, sp.Port, msg)+" -j "+verdict)
	}
	if sp.NodePort != 0 {
		out = append(out, "-A "+chainExternalServices+" -m addrtype --dst-type LOCAL "+extra+portMatch(sp.Protocol, sp.NodePort, msg)+" -j "+verdict)
	}
	return out
}

// internalMarkRules mark connections from pods and the node to the
// port's external addresses for its fwmark virtual server.
func internalMarkRules(rc *renderContext, sp *proxier.ServicePort, external []netip.Addr, mark uint32) []string {
	msg := sp.Name.String() + " internal traffic to external addresses"
	set := " -j MARK --set-xmark " + markArg(mark, rc.markMask)
	var out []string
	for _, ip := range external {
		out = append(out, "-A "+chainInternal+" -d "+hostPrefix(ip)+" "+portMatch(sp.Protocol, sp.Port, msg)+set)
	}
	if sp.NodePort != 0 {
		for _, ip := range rc.nodeAddrs {
			out = append(out, "-A "+chainInternal+" -d "+hostPrefix(ip)+" "+portMatch(sp.Protocol, sp.NodePort, msg)+set)
		}
	}
	return out
}

// staticRules are the rules that do not depend on services (they match
// the sets), per table.
type staticRules struct {
	nat, filter []string
}

func renderStatic(c *Config, f v1.IPFamily, local proxier.LocalMatch) staticRules {
	set := func(s setKind) string { return s.name(f) }
	masq := markArg(c.masqueradeMark(), c.masqueradeMark())
	var nat []string
	add := func(format string, a ...any) { nat = append(nat, fmt.Sprintf(format, a...)) }
	add("-A %s -j MARK --or-mark %#x", chainMarkMasq, c.masqueradeMark())
	add("-A %s -m comment --comment %s -m set --match-set %s dst,dst,src -j MASQUERADE", chainPostrouting, quote(setLoopBack.comment), set(setLoopBack))
	add("-A %s -m mark ! --mark %s -m addrtype --src-type LOCAL -m comment --comment %s -j MASQUERADE",
		chainPostrouting, markArg(0, c.internalMarkMask()), quote("node traffic to the endpoints of externalTrafficPolicy=Local services"))
	add("-A %s -m mark ! --mark %s -j RETURN", chainPostrouting, masq)
	add("-A %s -j MARK --xor-mark %#x", chainPostrouting, c.masqueradeMark())
	add("-A %s -m comment --comment %s -j MASQUERADE", chainPostrouting, quote("kubernetes service traffic requiring SNAT"))
	nat = append(nat, servicesChain(c, f, local)...)
	add("-A %s -m set --match-set %s dst,dst -j RETURN", chainLoadBalancer, set(setLoadBalancerLocal))
	add("-A %s -j %s", chainLoadBalancer, chainMarkMasq)
	for _, p := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP} {
		all, local := nodePortSets(p)
		proto := strings.ToLower(string(p))
		add("-A %s -p %s -m set --match-set %s dst -j RETURN", chainNodePort, proto, set(local))
		add("-A %s -p %s -m set --match-set %s dst -j %s", chainNodePort, proto, set(all), chainMarkMasq)
	}
	filter := []string{
		fmt.Sprintf("-A %s -m comment --comment %s -m mark --mark %s -j ACCEPT", chainForward, quote("kubernetes forwarding rules"), masq),
		fmt.Sprintf("-A %s -m comment --comment %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", chainForward, quote("kubernetes forwarding conntrack rule")),
		fmt.Sprintf("-A %s -m set --match-set %s dst,dst,src -j RETURN", chainSourceRanges, set(setLoadBalancerSourceCIDR)),
		fmt.Sprintf("-A %s -m comment --comment %s -m set --match-set %s dst,dst -j DROP", chainSourceRanges,
			quote("load balancer traffic from outside loadBalancerSourceRanges"), set(setLoadBalancerFW)),
	}
	return staticRules{nat: nat, filter: filter}
}

// localArgs is the local-traffic match (negated: "not local") in
// iptables syntax, as kube-proxy's IfLocal / IfNotLocal: "-s CIDR",
// "-i br0" or "-i cali+".
func localArgs(m proxier.LocalMatch, negated bool) string {
	not := ""
	if negated {
		not = "! "
	}
	switch {
	case m.CIDR.IsValid():
		return not + "-s " + m.CIDR.String()
	case m.Prefix:
		return not + "-i " + m.Interface + "+"
	}
	return not + "-i " + m.Interface
}

// servicesChain is nat KUBE-SERVICES: mark internal traffic for the
// fwmark services, flag for masquerade what needs it, accept service
// traffic, then NodePorts. Local traffic (the detector's match) and the
// node's own are internal traffic.
func servicesChain(c *Config, f v1.IPFamily, local proxier.LocalMatch) []string {
	set := func(s setKind) string { return s.name(f) }
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	if local.IsImplemented() {
		add("-A %s %s -j %s", chainServices, localArgs(local, false), chainInternal)
	}
	add("-A %s -m addrtype --src-type LOCAL -j %s", chainServices, chainInternal)
	add("-A %s -m comment --comment %s -m set --match-set %s dst,dst -j %s", chainServices, quote(setLoadBalancer.comment), set(setLoadBalancer), chainLoadBalancer)
	clusterMasq := fmt.Sprintf("-m comment --comment %s -m set --match-set %s dst,dst -j %s", quote(setClusterIP.comment), set(setClusterIP), chainMarkMasq)
	switch {
	case c.MasqueradeAll:
		add("-A %s %s", chainServices, clusterMasq)
	case local.IsImplemented():
		add("-A %s %s %s", chainServices, localArgs(local, true), clusterMasq)
	default:
		// No local-traffic detector: kube-proxy masquerades only node
		// traffic whose source is a VIP on kube-ipvs0 ("src,dst"); any
		// node source is masqueraded here, which covers that case too.
		add("-A %s -m addrtype --src-type LOCAL %s", chainServices, clusterMasq)
	}
	add("-A %s -m comment --comment %s -m set --match-set %s dst,dst -j %s", chainServices, quote(setExternalIP.comment), set(setExternalIP), chainMarkMasq)
	for _, s := range []setKind{setClusterIP, setLoadBalancer, setExternalIP, setExternalIPLocal} {
		add("-A %s -m set --match-set %s dst,dst -j ACCEPT", chainServices, set(s))
	}
	add("-A %s -m addrtype --dst-type LOCAL -j %s", chainServices, chainNodePort)
	return out
}

// payload is the iptables-restore input for one family: every chain of
// ours declared (so flushed) and filled.
func payload(st staticRules, filterRules, natRules []string) []byte {
	var b strings.Builder
	b.Grow(64 * (len(st.nat) + len(st.filter) + len(filterRules) + len(natRules) + 20))
	section := func(table string, chains []string, rules ...[]string) {
		b.WriteString("*" + table + "\n")
		for _, c := range chains {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, rs := range rules {
			for _, r := range rs {
				b.WriteString(r + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	section("filter", filterChains, st.filter, filterRules)
	section("nat", natChains, st.nat, natRules)
	return []byte(b.String())
}

// iptablesPayloads are the restore inputs of every family: the static
// rules, whose local-traffic match follows the node (NodeCIDR detection
// follows its pod CIDRs), and every port's rules from the model.
func iptablesPayloads(c *Config, node proxier.NodeInfo, m *model) map[v1.IPFamily][]byte {
	out := map[v1.IPFamily][]byte{}
	for _, f := range c.families() {
		filter, nat := portRules(m, f)
		out[f] = payload(renderStatic(c, f, c.LocalDetector.Match(f, node)), filter, nat)
	}
	return out
}

// portRules collects the per-port rules of a family, ordered by port
// name so the payload is stable.
func portRules(m *model, f v1.IPFamily) (filter, nat []string) {
	keys := make([]portKey, 0, len(m.ports))
	for k, r := range m.ports {
		if k.Family == f && (len(r.filter) > 0 || len(r.nat) > 0) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, c portKey) int { return cmpString(a.String(), c.String()) })
	for _, k := range keys {
		r := m.ports[k]
		filter = append(filter, r.filter...)
		nat = append(nat, r.nat...)
	}
	return filter, nat
}

// withJumps adds "-I CHAIN 1 ..." lines at the end of each table's
// section, last jump first so they end up in order.
func withJumps(data []byte, missing []jump) []byte {
	if len(missing) == 0 {
		return data
	}
	out := string(data)
	for _, table := range []string{"filter", "nat"} {
		var lines []string
		for i := len(missing) - 1; i >= 0; i-- {
			if j := missing[i]; j.table == table {
				lines = append(lines, j.insertLine())
			}
		}
		if len(lines) == 0 {
			continue
		}
		start := strings.Index(out, "*"+table+"\n")
		end := start + strings.Index(out[start:], "COMMIT\n")
		out = out[:end] + strings.Join(lines, "\n") + "\n" + out[end:]
	}
	return []byte(out)
}

// OwnsChain reports whether this mode writes the chain: after a takeover
// such chains are rewritten by the first sync, never swept.
func OwnsChain(table, name string) bool {
	switch table {
	case "nat":
		return slices.Contains(natChains, name)
	case "filter":
		return slices.Contains(filterChains, name)
	}
	return false
}
