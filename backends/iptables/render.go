package iptables

import (
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/nfacct"
	"github.com/switchyard-proxy/switchyard/internal/shrink"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Render returns the rules a full sync of state would install for one IP
// family. It is pure and does not touch iptables; for tests and tools
// (kernel tests compare it with iptables-save).
func Render(cfg Config, state *proxier.State, family v1.IPFamily) *Ruleset {
	return render(cfg.forFamily(family), state)
}

// render builds the desired ruleset of one family from a State. It is pure:
// no I/O, no clock, the same State always gives the same text. Service
// ports without a cluster IP of the family, or with an unsupported
// protocol, are left out of the family.
func render(fc *familyConfig, state *proxier.State) *Ruleset {
	return renderFull(fc, state, false)
}

// renderSealed is render with every service chain sealed as soon as it is
// rendered (sealed.go): what a full sync plans and records with.
func renderSealed(fc *familyConfig, state *proxier.State) *Ruleset {
	return renderFull(fc, state, true)
}

func renderFull(fc *familyConfig, state *proxier.State, seal bool) *Ruleset {
	rs := newRuleset(fc, state)
	names := sortedNames(state)
	for i, spr := range renderAll(fc, state, names, seal) {
		if spr != nil {
			rs.names = append(rs.names, names[i])
			rs.services[names[i]] = spr
		}
	}
	rs.changed = rs.names
	rs.dispatch, rs.dispatchRebuilt = buildDispatch(fc, rs), true
	return rs
}

// renderChunk is the fewest service ports worth a goroutine of their own.
const renderChunk = 256

// renderAll renders every named service port, in parallel over the CPUs
// for big states: the render is on the critical path of a first sync
// (~10 ms at 1k services, ~100 ms at 10k on two CPUs), before the restore
// can start. out[i] is names[i]'s rules, nil when it has none of the
// family; each goroutine fills its own contiguous range with its own
// renderer, so the result does not depend on the scheduling.
func renderAll(fc *familyConfig, state *proxier.State, names []proxier.ServicePortName, seal bool) []*servicePortRules {
	out := make([]*servicePortRules, len(names))
	workers := min(runtime.GOMAXPROCS(0), (len(names)+renderChunk-1)/renderChunk)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(names)/workers, (w+1)*len(names)/workers
		wg.Go(func() {
			r := newServiceRenderer(fc, nodeOf(state))
			for i := lo; i < hi; i++ {
				sp := state.Services[names[i]]
				out[i] = r.render(sp, state.Endpoints[names[i]])
				if seal && out[i] != nil {
					out[i].seal(sp)
				}
			}
		})
	}
	wg.Wait()
	return out
}

// renderPartial re-renders only the service ports a Diff names and reuses
// prev for every other one. It trusts Diff.Changed to name every port
// whose service or endpoints changed (the proxier's contract; a periodic
// full sync heals a wrong Diff), so a one-endpoint change costs one port,
// not the table. The top-level dispatch chains are rebuilt only when the
// set of rendered ports changed or a re-rendered port's contribution to
// them changed (for instance it lost its last endpoint). The result
// equals render(fc, state) as long as prev was rendered with the same
// configuration and node addresses; otherwise the caller renders in full.
func renderPartial(fc *familyConfig, state *proxier.State, diff *proxier.Diff, prev *Ruleset) *Ruleset {
	rs := newRuleset(fc, state)
	rs.services, rs.servicesPeak = maps.Clone(prev.services), prev.servicesPeak
	r := newServiceRenderer(fc, nodeOf(state))
	dispatchChanged, setChanged := diff.ServicesChanged, false
	for n := range diff.Changed {
		old := prev.services[n]
		var spr *servicePortRules
		if state != nil {
			// nil when gone or not of this family.
			spr = r.render(state.Services[n], state.Endpoints[n])
		}
		switch {
		case spr != nil:
			rs.services[n] = spr
		case old != nil:
			delete(rs.services, n)
		}
		if spr != nil || old != nil {
			rs.changed = append(rs.changed, n)
		}
		setChanged = setChanged || (old == nil) != (spr == nil)
		dispatchChanged = dispatchChanged || !sameShared(old, spr)
	}
	slices.SortFunc(rs.changed, compareNames)
	rs.services = shrink.Map(rs.services, &rs.servicesPeak)
	rs.names = prev.names
	if setChanged {
		rs.names = slices.SortedFunc(maps.Keys(rs.services), compareNames)
	}
	if dispatchChanged || setChanged {
		rs.dispatch, rs.dispatchRebuilt = buildDispatch(fc, rs), true
	} else {
		rs.dispatch = prev.dispatch
	}
	return rs
}

func newRuleset(fc *familyConfig, state *proxier.State) *Ruleset {
	return &Ruleset{
		family:   fc.family,
		node:     nodeAddrs(nodeOf(state), fc.family),
		local:    fc.localDetector.Match(fc.family, nodeOf(state)),
		services: map[proxier.ServicePortName]*servicePortRules{},
		base:     baseChains(fc),
	}
}

func nodeOf(state *proxier.State) proxier.NodeInfo {
	if state == nil {
		return proxier.NodeInfo{}
	}
	return state.Node
}

func sortedNames(state *proxier.State) []proxier.ServicePortName {
	if state == nil {
		return nil
	}
	return slices.SortedFunc(maps.Keys(state.Services), compareNames)
}

func compareNames(a, b proxier.ServicePortName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := strings.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	return strings.Compare(string(a.Protocol), string(b.Protocol))
}

// sameShared reports whether two renders of a service port add the same
// rules to the top-level chains.
func sameShared(a, b *servicePortRules) bool {
	if a == nil || b == nil {
		return a == b
	}
	for i := range a.shared {
		if !slices.Equal(a.shared[i], b.shared[i]) {
			return false
		}
	}
	return true
}

// nodeAddrs returns the node's valid addresses of one family, unmapped.
func nodeAddrs(node proxier.NodeInfo, family v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range node.Addresses {
		if a.IsValid() && proxier.FamilyOf(a) == family {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// masqueradeRules SNAT what was marked, with a random source port for
// every connection as kube-proxy does; with MasqueradeTCPKeepPort, TCP
// keeps the client's source port where it is free: with a random
// port, connections from different client ports reach an endpoint from
// the same node address and port within its TIME_WAIT, carrying
// timestamps and sequence numbers computed for other 4-tuples; about half
// of them fail the TIME_WAIT socket's PAWS check, which answers with an
// ACK, and the client connects only after a reset and a SYN retransmit
// (~10 ms, or 1 s for a second miss). See docs/performance.md. UDP and
// SCTP stay --random-fully, which spreads clients that share a source port.
func masqueradeRules(fc *familyConfig) []string {
	all := rule(chainPostrouting, comment("kubernetes service traffic requiring SNAT"), "-j MASQUERADE --random-fully")
	if !fc.tcpKeepPort {
		return []string{all}
	}
	tcp := rule(chainPostrouting, "-p tcp", comment("kubernetes service TCP traffic requiring SNAT keeps its source port"), "-j MASQUERADE")
	return []string{tcp, all}
}

// baseChains are the chains whose rules do not depend on services.
func baseChains(fc *familyConfig) []*chainRules {
	mark := fc.masqueradeMark
	postrouting := append([]string{
		rule(chainPostrouting, "-m mark ! --mark "+mark+"/"+mark+" -j RETURN"),
		// Clear the mark so a packet that re-traverses the stack is not
		// masqueraded twice.
		rule(chainPostrouting, "-j MARK --xor-mark "+mark),
	}, masqueradeRules(fc)...)
	out := []*chainRules{
		newChain(tableMangle, chainCanary),
		newChain(tableFilter, chainCanary),
		newChain(tableNAT, chainCanary),
		newChain(tableNAT, chainMarkMasq, rule(chainMarkMasq, "-j MARK --or-mark "+mark)),
		newChain(tableNAT, chainPostrouting, postrouting...),
		newChain(tableFilter, chainForward, forwardRules(fc, mark)...),
	}
	out = append(out, trafficChain(fc)...)
	if fc.localhostNodePorts {
		// route_localnet opens a hole (kubernetes#90259) this rule closes;
		// kubelet writes the same rule.
		out = append(out, newChain(tableFilter, chainKubeletFirewall,
			rule(chainKubeletFirewall, "! -s 127.0.0.0/8 -d 127.0.0.0/8", comment("block incoming localnet connections"),
				"-m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP")))
	}
	return out
}

// forwardRules is filter KUBE-FORWARD. INVALID packets, which would
// otherwise reset connections (kubernetes#74839), are dropped unless
// conntrack is liberal about TCP windows, and counted in nfacct when asked.
func forwardRules(fc *familyConfig, mark string) []string {
	var out []string
	if fc.dropInvalid {
		count := ""
		if fc.nfacct {
			count = " -m nfacct --nfacct-name " + nfacct.CTStateInvalidDropped
		}
		out = append(out, rule(chainForward, "-m conntrack --ctstate INVALID"+count+" -j DROP"))
	}
	return append(out,
		rule(chainForward, comment("kubernetes forwarding rules"), "-m mark --mark "+mark+"/"+mark+" -j ACCEPT"),
		rule(chainForward, comment("kubernetes forwarding conntrack rule"), "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"))
}

// buildDispatch assembles the top-level chains from every service port's
// shared rules, in service-name order, and ends nat KUBE-SERVICES with the
// jump to KUBE-NODEPORTS (which must be its last rule).
func buildDispatch(fc *familyConfig, rs *Ruleset) []*chainRules {
	collect := func(s shared) []string {
		var out []string
		for _, n := range rs.names {
			out = append(out, rs.services[n].shared[s]...)
		}
		return out
	}
	natServices := append(collect(sharedNATServices), nodePortsJumps(fc)...)
	return []*chainRules{
		newChain(tableNAT, chainNodePorts, collect(sharedNATNodePorts)...),
		newChain(tableNAT, chainServices, natServices...),
		newChain(tableFilter, chainServices, collect(sharedFilterServices)...),
		newChain(tableFilter, chainExternalServices, collect(sharedFilterExternal)...),
		newChain(tableFilter, chainNodePorts, collect(sharedFilterNodePorts)...),
		newChain(tableFilter, chainProxyFirewall, collect(sharedFilterFirewall)...),
	}
}

// nodePortsJumps are the last rules of nat KUBE-SERVICES. Without
// NodePortAddresses every local address takes NodePorts; with them only
// local addresses inside the prefixes do (matching the prefixes plus
// addrtype LOCAL, so interface changes need no resync).
func nodePortsJumps(fc *familyConfig) []string {
	const note = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"
	prefixes, all := nodePortPrefixes(fc)
	if all {
		return []string{rule(chainServices, allNodePortsDst(fc)+comment(note), "-m addrtype --dst-type LOCAL -j", chainNodePorts)}
	}
	var out []string
	for _, p := range prefixes {
		out = append(out, rule(chainServices, "-d "+p.String(), comment(note), "-m addrtype --dst-type LOCAL -j", chainNodePorts))
	}
	return out
}

// nodePortPrefixes are the --nodeport-addresses prefixes NodePorts are
// served on (loopback ones only with localhost NodePorts), or all when
// every local address serves them.
func nodePortPrefixes(fc *familyConfig) (prefixes []netip.Prefix, all bool) {
	if len(fc.nodePortAddresses) == 0 {
		return nil, true
	}
	loopback := loopbackPrefix(fc.family)
	for _, p := range fc.nodePortAddresses {
		if loopback.Contains(p.Addr()) && p.Bits() >= loopback.Bits() && !fc.localhostNodePorts {
			continue
		}
		prefixes = append(prefixes, p)
	}
	return prefixes, false
}

// allNodePortsDst is the destination match (with a trailing space, or
// empty) when every local address serves NodePorts: loopback excluded
// unless localhost NodePorts are on (they never work on IPv6 and need
// route_localnet on IPv4).
func allNodePortsDst(fc *familyConfig) string {
	if fc.localhostNodePorts {
		return ""
	}
	return "! -d " + loopbackPrefix(fc.family).String() + " "
}

func loopbackPrefix(family v1.IPFamily) netip.Prefix {
	if family == v1.IPv6Protocol {
		return netip.MustParsePrefix("::1/128")
	}
	return netip.MustParsePrefix("127.0.0.0/8")
}

// rule joins a rule's parts into "-A chain part part ...".
func rule(chain string, parts ...string) string {
	n := 3 + len(chain)
	for _, p := range parts {
		n += 1 + len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString("-A ")
	b.WriteString(chain)
	for _, p := range parts {
		if p == "" {
			continue
		}
		b.WriteByte(' ')
		b.WriteString(p)
	}
	return b.String()
}

// comment is a comment match; the text is always quoted, as iptables-save
// prints it.
func comment(text string) string { return `-m comment --comment "` + text + `"` }
