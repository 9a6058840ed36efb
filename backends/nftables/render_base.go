package nftables

import (
	"slices"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Shorthands for the rules below.
var (
	keyDst      = ruleset.Fields{ruleset.FieldDaddr, ruleset.FieldL4Proto, ruleset.FieldDport}
	keyNodePort = ruleset.Fields{ruleset.FieldL4Proto, ruleset.FieldDport}
	keyHairpin  = ruleset.Fields{ruleset.FieldSaddr, ruleset.FieldDaddr}
	keyClient   = ruleset.Fields{ruleset.FieldSaddr}
	newConn     = ruleset.CtState{State: "new"}
)

func jump(chain string) ruleset.Do  { return ruleset.Do{Kind: "jump", Chain: chain} }
func gotoC(chain string) ruleset.Do { return ruleset.Do{Kind: "goto", Chain: chain} }
func verdict(kind string) ruleset.Do {
	return ruleset.Do{Kind: kind}
}
func proto(p uint8) ruleset.Cmp { return ruleset.Cmp{Field: ruleset.FieldL4Proto, Num: uint32(p)} }

// Hook priorities: the filter checks run before DNAT (dstnat - 10), as
// upstream's, so they see the service address the client used.
const (
	prioDstNAT       = -100
	prioSrcNAT       = 100
	prioFilterPreNAT = prioDstNAT - 10
)

// baseSets are the table-wide sets and maps of one family (the endpoint
// maps are added per endpoint group).
func baseSets(fc *familyConfig) []*ruleset.Set {
	sets := []*ruleset.Set{
		{Name: setServiceIPs, Kind: ruleset.VerdictMap, Key: keyDst, Comment: "ClusterIP, ExternalIP and LoadBalancer IP traffic"},
		{Name: setServiceNodePorts, Kind: ruleset.VerdictMap, Key: keyNodePort, Comment: "NodePort traffic"},
		{Name: setFirewallIPs, Kind: ruleset.VerdictMap, Key: keyDst, Comment: "destinations that are subject to LoadBalancerSourceRanges"},
		{Name: setNoEndpoints, Key: keyDst, Comment: "service addresses with no endpoints"},
		{Name: setNoEndpointPorts, Key: keyNodePort, Comment: "NodePorts with no endpoints"},
		{Name: setHairpin, Key: keyHairpin, Comment: "endpoint . endpoint: connections a pod makes to itself through a service"},
		{Name: setClusterIPPorts, Key: keyDst, Comment: "ClusterIP traffic, masqueraded unless it comes from a local pod"},
	}
	return append(sets, trafficSets(fc)...)
}

// baseChains are the table-wide chains of one family; local is the node's
// local-traffic match (only the services chain's first rule uses it).
func baseChains(fc *familyConfig, local proxier.LocalMatch) []*ruleset.Chain {
	checks := append(trafficRules(fc), ruleset.R(newConn, jump(chainFirewallCheck)), ruleset.R(newConn, jump(chainEndpointsCheck)))
	return []*ruleset.Chain{
		{Name: chainFilterPrerouting, Hook: &ruleset.Hook{Type: "filter", Hook: "prerouting", Priority: prioFilterPreNAT}, Rules: checks},
		{Name: chainFilterOutput, Hook: &ruleset.Hook{Type: "filter", Hook: "output", Priority: prioFilterPreNAT}, Rules: checks},
		{Name: chainNATPrerouting, Hook: &ruleset.Hook{Type: "nat", Hook: "prerouting", Priority: prioDstNAT},
			Rules: []ruleset.Rule{ruleset.R(jump(chainServices))}},
		{Name: chainNATOutput, Hook: &ruleset.Hook{Type: "nat", Hook: "output", Priority: prioDstNAT},
			Rules: []ruleset.Rule{ruleset.R(jump(chainServices))}},
		{Name: chainNATPostrouting, Hook: &ruleset.Hook{Type: "nat", Hook: "postrouting", Priority: prioSrcNAT},
			Rules: []ruleset.Rule{
				ruleset.R(ruleset.CtDNAT{}, ruleset.Lookup{Key: keyHairpin, Set: setHairpin}, jump(chainMarkMasq)).WithComment("hairpin"),
				ruleset.R(jump(chainMasquerading)),
			}},
		{Name: chainFirewallCheck, Rules: []ruleset.Rule{ruleset.R(ruleset.VMap{Key: keyDst, Map: setFirewallIPs})}},
		{Name: chainEndpointsCheck, Rules: endpointsCheckRules(fc)},
		{Name: chainMarkMasq, Rules: []ruleset.Rule{ruleset.R(ruleset.MarkSet{Bit: fc.masqueradeMark})}},
		{Name: chainMasquerading, Rules: slices.Concat([]ruleset.Rule{
			ruleset.R(ruleset.MarkClear{Bit: fc.masqueradeMark}, verdict("return")),
			ruleset.R(ruleset.MarkSet{Bit: fc.masqueradeMark, Xor: true}),
		}, masqueradeRules(fc))},
		{Name: chainServices, Rules: slices.Concat(clusterIPMasquerade(fc, local),
			[]ruleset.Rule{ruleset.R(ruleset.VMap{Key: keyDst, Map: setServiceIPs})},
			nodePortRules(fc, ruleset.VMap{Key: keyNodePort, Map: setServiceNodePorts}))},
	}
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
// SCTP stay fully-random, which spreads clients that share a source port.
func masqueradeRules(fc *familyConfig) []ruleset.Rule {
	all := ruleset.R(ruleset.Masquerade{FullyRandom: true})
	if !fc.tcpKeepPort {
		return []ruleset.Rule{all}
	}
	tcp := ruleset.R(proto(ruleset.ProtoTCP), ruleset.Masquerade{})
	return []ruleset.Rule{tcp, all}
}

// clusterIPMasquerade marks ClusterIP traffic for masquerading (all of
// it with --masquerade-all, else what does not come from a local pod; no
// rule without a local-traffic detector, as kube-proxy). kube-proxy
// writes this rule at the top of every service chain; one rule before the
// dispatch, matching the cluster-ip-ports set, does the same for every
// port: 88k fewer rules for the kernel to load and validate at 44k
// Services x 2 ports.
func clusterIPMasquerade(fc *familyConfig, local proxier.LocalMatch) []ruleset.Rule {
	isClusterIP := ruleset.Lookup{Key: keyDst, Set: setClusterIPPorts}
	switch {
	case fc.masqueradeAll:
		return []ruleset.Rule{ruleset.R(isClusterIP, jump(chainMarkMasq))}
	case local.IsImplemented():
		return []ruleset.Rule{ruleset.R(localExpr(local, true), isClusterIP, jump(chainMarkMasq))}
	}
	return nil
}

// nodePortRules are one rule per set of destinations that accept
// NodePorts, each ending with the given expressions: local addresses in
// each --nodeport-addresses prefix of the family, or, without any, every
// local address. Never
// loopback: nf_tables has no route_localnet, so a loopback destination
// DNATed to a pod would never be routed; a prefix holding loopback gets
// "daddr != loopback", and localhost NodePorts are served, if at all, by
// the userspace relay (userspace.LocalhostNodePorts) the packets reach
// untouched. The prefixes are configuration, so they are rules, as in the
// iptables mode.
func nodePortRules(fc *familyConfig, tail ...ruleset.Expr) []ruleset.Rule {
	local := ruleset.FibLocal{Field: ruleset.FieldDaddr}
	notLoopback := ruleset.Cmp{Field: ruleset.FieldDaddr, Neq: true, Prefix: fc.loopback}
	var matches [][]ruleset.Expr
	for _, p := range fc.nodePortAddrs {
		m := []ruleset.Expr{local, ruleset.Cmp{Field: ruleset.FieldDaddr, Prefix: p.Masked()}}
		if p.Masked().Overlaps(fc.loopback) {
			if fc.loopback.Bits() <= p.Bits() {
				continue // the prefix is all loopback
			}
			m = append(m, notLoopback)
		}
		matches = append(matches, m)
	}
	if len(fc.nodePortAddrs) == 0 {
		matches = [][]ruleset.Expr{{local, notLoopback}}
	}
	out := make([]ruleset.Rule, len(matches))
	for i, m := range matches {
		out[i] = ruleset.R(append(m, tail...)...)
	}
	return out
}

// endpointsCheckRules refuse new connections to service addresses without
// endpoints: a TCP reset for TCP, ICMP port unreachable otherwise. They
// are data-driven (set membership), so a service losing or regaining its
// last endpoint changes elements only.
func endpointsCheckRules(fc *familyConfig) []ruleset.Rule {
	svc := ruleset.Lookup{Key: keyDst, Set: setNoEndpoints}
	np := ruleset.Lookup{Key: keyNodePort, Set: setNoEndpointPorts}
	tcp := proto(ruleset.ProtoTCP)
	rules := []ruleset.Rule{
		ruleset.R(tcp, svc, ruleset.Reject{TCPReset: true}),
		ruleset.R(svc, ruleset.Reject{}),
	}
	rules = append(rules, nodePortRules(fc, tcp, np, ruleset.Reject{TCPReset: true})...)
	return append(rules, nodePortRules(fc, np, ruleset.Reject{})...)
}
