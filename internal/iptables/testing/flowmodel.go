package iptablestest

import (
	"net/netip"
	"strings"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// flowSrcPort is the ephemeral source port of traced flowtest packets.
const flowSrcPort = 40000

// FlowModel is the iptables backend's flowtest.Model: it traces each
// packet through the fake's current rules.
type FlowModel struct {
	Fake *Fake
	// NodeIPs are the node's addresses (flowtest.NodeConfig.NodeIPs).
	NodeIPs []netip.Addr
}

// Flow implements flowtest.Model. Masquerade is always reported.
func (m FlowModel) Flow(p flowtest.Packet) (flowtest.Expect, error) {
	fam := runner.IPv4
	if p.DstIP.Is6() {
		fam = runner.IPv6
	}
	res, err := m.Fake.Trace(fam, Packet{
		SrcIP:    p.SrcIP,
		DstIP:    p.DstIP,
		Protocol: strings.ToLower(string(p.Protocol)),
		SrcPort:  flowSrcPort,
		DstPort:  p.DstPort,
		Local:    p.SrcLocal,
		NodeIPs:  m.NodeIPs,
		// The rules' -o matches are not on the flows the table traces.
		InInterface: p.InInterface,
	})
	if err != nil {
		return flowtest.Expect{}, err
	}
	return flowtest.Expect{
		Endpoints:   res.Endpoints,
		Reject:      res.Rejected,
		Drop:        res.Dropped,
		Masquerade:  res.Masquerade,
		MasqChecked: true,
	}, nil
}
