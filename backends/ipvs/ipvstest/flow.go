package ipvstest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// FlowModel answers flowtest packets from what the backend programmed
// into the fake node.
type FlowModel struct {
	K *Kernel
	// NodeIPs are the node's own addresses (the addresses on the fake
	// links are local too).
	NodeIPs []netip.Addr
}

var _ flowtest.Model = (*FlowModel)(nil)

// FlowModel returns the packet-flow model of the fake node.
func (k *Kernel) FlowModel(nodeIPs []netip.Addr) *FlowModel {
	return &FlowModel{K: k, NodeIPs: nodeIPs}
}

// Flow follows the packet the way the kernel does in IPVS mode:
//  1. nat PREROUTING (OUTPUT from the node) and filter INPUT (OUTPUT):
//     marks, REJECT, DROP — traced on the expanded rules;
//  2. IPVS in LOCAL_IN: only for local destinations (service addresses
//     sit on kube-ipvs0); a fwmark service for the packet's mark, else
//     the protocol/address/port service; one without a usable real
//     server answers ICMP port unreachable (a reject);
//  3. nat POSTROUTING towards each real server, with the packet's mark:
//     masquerade.
func (m *FlowModel) Flow(p flowtest.Packet) (flowtest.Expect, error) {
	fam := runner.IPv4
	if p.DstIP.Is6() {
		fam = runner.IPv6
	}
	rules, err := m.K.expandedRules(fam)
	if err != nil {
		return flowtest.Expect{}, err
	}
	local := append(slices.Clone(m.NodeIPs), m.K.Netlink.AllAddresses()...)
	proto := strings.ToLower(string(p.Protocol))
	pkt := iptablestest.Packet{SrcIP: p.SrcIP, DstIP: p.DstIP, Protocol: proto, SrcPort: 40000,
		DstPort: p.DstPort, Local: p.SrcLocal, NodeIPs: local, InInterface: p.InInterface}
	first, err := onePath(rules, fam, pkt)
	if err != nil {
		return flowtest.Expect{}, err
	}
	switch first.Verdict {
	case "DROP":
		return flowtest.Expect{Drop: true}, nil
	case "REJECT":
		return flowtest.Expect{Reject: true}, nil
	}
	if !slices.Contains(local, p.DstIP) {
		return flowtest.Expect{MasqChecked: true, Masquerade: first.Masquerade}, nil
	}
	vs, ok := m.K.IPVS.Lookup(first.Mark, string(p.Protocol), netip.AddrPortFrom(p.DstIP, p.DstPort))
	if !ok {
		return flowtest.Expect{MasqChecked: true, Masquerade: first.Masquerade}, nil
	}
	return m.toRealServers(rules, fam, pkt, first, vs)
}

func (m *FlowModel) toRealServers(rules *iptablestest.Fake, fam runner.Family, pkt iptablestest.Packet, first iptablestest.Path, vs VirtualServer) (flowtest.Expect, error) {
	out := flowtest.Expect{MasqChecked: true, Masquerade: first.Masquerade}
	for _, rs := range vs.Reals {
		if rs.Weight <= 0 {
			continue
		}
		out.Endpoints = append(out.Endpoints, rs.Addr.String())
		post := pkt
		post.DstIP, post.DstPort, post.Local, post.Mark = rs.Addr.Addr(), rs.Addr.Port(), true, first.Mark
		post.InInterface = "" // traced as the node's own: no input interface
		path, err := onePath(rules, fam, post)
		if err != nil {
			return out, fmt.Errorf("towards %s: %w", rs.Addr, err)
		}
		if path.Verdict != "ACCEPT" {
			return out, fmt.Errorf("towards %s: %s after IPVS", rs.Addr, path.Verdict)
		}
		out.Masquerade = out.Masquerade || path.Masquerade
	}
	if len(out.Endpoints) == 0 {
		return flowtest.Expect{Reject: true}, nil
	}
	return out, nil
}

// onePath traces the packet; the companion rules have no random choice,
// so exactly one path is expected, and no DNAT (IPVS translates).
func onePath(rules *iptablestest.Fake, fam runner.Family, pkt iptablestest.Packet) (iptablestest.Path, error) {
	res, err := rules.Trace(fam, pkt)
	if err != nil {
		return iptablestest.Path{}, err
	}
	if len(res.Paths) != 1 {
		return iptablestest.Path{}, fmt.Errorf("%d paths, want 1: %+v", len(res.Paths), res.Paths)
	}
	if res.Paths[0].DNAT != "" {
		return iptablestest.Path{}, fmt.Errorf("iptables DNAT to %s in IPVS mode", res.Paths[0].DNAT)
	}
	return res.Paths[0], nil
}
