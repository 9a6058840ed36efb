package testing

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// FlowModel answers the shared packet-flow table from what the backend
// wrote into the fake: the packet walks the hooks it would cross (filter
// then nat at prerouting, or at output for node-local traffic), then
// nat postrouting once per endpoint it may reach.
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
	env := traceEnv{Table: t, local: m.NodeIPs}
	p := &ruleset.Packet{Saddr: fp.SrcIP, Daddr: fp.DstIP, L4Proto: protoNum(fp.Protocol), Dport: fp.DstPort, Iifname: fp.InInterface}
	hook := "prerouting"
	if fp.SrcLocal {
		hook = "output"
	}
	var targets []netip.AddrPort
	for _, c := range baseChains(t, hook) {
		v, err := runChain(env, c, p, 0)
		if err != nil {
			return flowtest.Expect{}, err
		}
		switch {
		case v == nil:
		case v.drop:
			return flowtest.Expect{Drop: true}, nil
		case v.reject:
			return flowtest.Expect{Reject: true}, nil
		case v.targets != nil:
			targets = v.targets
		}
	}
	return m.postrouting(env, p, targets)
}

// postrouting runs nat postrouting for each possible endpoint (or the
// original destination when nothing was DNATed).
func (m FlowModel) postrouting(env traceEnv, p *ruleset.Packet, targets []netip.AddrPort) (flowtest.Expect, error) {
	out := flowtest.Expect{MasqChecked: true}
	dsts := targets
	if len(dsts) == 0 {
		dsts = []netip.AddrPort{netip.AddrPortFrom(p.Daddr, p.Dport)}
	}
	for _, d := range dsts {
		q := *p
		q.Daddr, q.Dport, q.DNATed = d.Addr(), d.Port(), len(targets) > 0
		for _, c := range baseChains(env.Table, "postrouting") {
			v, err := runChain(env, c, &q, 0)
			if err != nil {
				return flowtest.Expect{}, err
			}
			if v != nil && v.masq {
				out.Masquerade = true
			}
		}
	}
	for _, t := range targets {
		out.Endpoints = append(out.Endpoints, t.String())
	}
	return out, nil
}

func protoNum(p v1.Protocol) uint8 {
	switch p {
	case v1.ProtocolUDP:
		return ruleset.ProtoUDP
	case v1.ProtocolSCTP:
		return ruleset.ProtoSCTP
	}
	return ruleset.ProtoTCP
}
