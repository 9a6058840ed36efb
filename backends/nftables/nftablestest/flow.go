package nftablestest

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// FlowModel answers the shared packet-flow table from what the backend
// wrote into the fake, with the tracer of package ruleset (Table.Trace):
// the packet walks the hooks it would cross (filter then nat at
// prerouting, or at output for node-local traffic), then nat postrouting
// once per endpoint it may reach.
type FlowModel struct {
	Fake    *Fake
	NodeIPs []netip.Addr
}

var _ flowtest.Model = FlowModel{}

// Flow implements flowtest.Model.
func (m FlowModel) Flow(fp flowtest.Packet) (flowtest.Expect, error) {
	fam := ruleset.IPv4
	if fp.DstIP.Is6() && !fp.DstIP.Is4In6() {
		fam = ruleset.IPv6
	}
	t := m.Fake.Table(fam, nftables.TableName)
	if t == nil {
		return flowtest.Expect{MasqChecked: true}, nil
	}
	proto, ok := nftables.ProtocolNumber(fp.Protocol)
	if !ok {
		return flowtest.Expect{}, fmt.Errorf("protocol %q", fp.Protocol)
	}
	p := ruleset.Packet{Saddr: fp.SrcIP, Daddr: fp.DstIP, L4Proto: proto, Dport: fp.DstPort, Iifname: fp.InInterface}
	res, err := t.Trace(p, m.NodeIPs, fp.SrcLocal)
	if err != nil {
		return flowtest.Expect{}, err
	}
	return expectOf(res), nil
}

// expectOf sums the paths up: refused if any path is (the masquerade
// column is then not checked), else every endpoint some path reaches.
func expectOf(res ruleset.TraceResult) flowtest.Expect {
	out := flowtest.Expect{MasqChecked: true}
	for _, p := range res.Paths {
		switch p.Verdict {
		case "drop":
			return flowtest.Expect{Drop: true}
		case "reject":
			return flowtest.Expect{Reject: true}
		}
		out.Masquerade = out.Masquerade || p.Masquerade
		if ep := p.DNAT.String(); p.DNAT.IsValid() && !slices.Contains(out.Endpoints, ep) {
			out.Endpoints = append(out.Endpoints, ep)
		}
	}
	return out
}
