package explain

import (
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
)

// balance is IPVS in LOCAL_IN: the virtual server the packet matches
// sends it to its real servers, each with its scheduler's share; without
// one, the node keeps the packet for its own sockets.
func (p *ipvsPlane) balance(pr Probe, pkt iptablestest.Packet, s iptablestest.Path) ([]Path, error) {
	dst := netip.AddrPortFrom(pkt.DstIP, pkt.DstPort)
	vs := lookupVirtualServer(p.vss, s.Mark, pr.Protocol, dst)
	if vs == nil {
		note := fmt.Sprintf("no IPVS virtual server for %s/%s: not load-balanced, the node delivers it to its own sockets", dst, pr.Protocol)
		return []Path{pathOf(s, netip.AddrPort{}, note)}, nil
	}
	shares, note := vs.shares()
	s.Rules = append(s.Rules[:len(s.Rules):len(s.Rules)], "ipvs: "+vs.String()+" "+realServers(vs))
	var out []Path
	for i, d := range vs.Dests {
		if shares[i] == 0 {
			continue
		}
		paths, err := p.toRealServer(pr, pkt, s, d, shares[i])
		if err != nil {
			return nil, err
		}
		for _, path := range paths {
			path.AffinitySeconds = int(vs.Timeout)
			path.Note = note
			out = append(out, path)
		}
	}
	if len(out) == 0 {
		refused := pathOf(s, netip.AddrPort{}, fmt.Sprintf("IPVS %s has no real server of weight > 0: it answers ICMP port unreachable", vs))
		refused.Verdict = "reject"
		return []Path{refused}, nil
	}
	return out, nil
}

// toRealServer follows the packet IPVS rewrote to real server d: out
// through filter OUTPUT and, for an arriving packet, nat POSTROUTING
// (the node's own packet went through it before IPVS).
func (p *ipvsPlane) toRealServer(pr Probe, pkt iptablestest.Packet, s iptablestest.Path, d realServer, share float64) ([]Path, error) {
	after := pkt
	after.DstIP, after.DstPort, after.Mark = d.Addr.Addr(), d.Addr.Port(), s.Mark
	hooks := []string{"filter/OUTPUT", "nat/POSTROUTING"}
	if pr.FromNode {
		hooks = hooks[:1]
	}
	s.Probability *= share
	paths, err := p.stage(after, s, hooks...)
	if err != nil {
		return nil, fmt.Errorf("after IPVS, towards %s: %w", d.Addr, err)
	}
	out := make([]Path, 0, len(paths))
	for _, a := range paths {
		ep := d.Addr
		if a.Verdict != "ACCEPT" {
			ep = netip.AddrPort{}
		}
		path := pathOf(a, ep, "")
		if f := forwardName(d.Forward); f != "" {
			// Not NAT: the real server gets the packet unchanged.
			path.Rules = append(path.Rules, "ipvs: "+d.Addr.String()+" by "+f)
		}
		out = append(out, path)
	}
	return out, nil
}

// realServers lists "-> 10.244.1.2:8080 weight 1, ...".
func realServers(vs *virtualServer) string {
	if len(vs.Dests) == 0 {
		return "-> (no real server)"
	}
	out := "->"
	for i, d := range vs.Dests {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf(" %s weight %d", d.Addr, d.Weight)
	}
	return out
}
