package iptables

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// flowSrcPort is the ephemeral source port of traced flowtest packets.
const flowSrcPort = 40000

// flowModel is this backend's flowtest.Model: it traces each
// packet through the fake's current rules.
type flowModel struct {
	Fake *iptablestest.Fake
	// NodeIPs are the node's addresses (flowtest.NodeConfig.NodeIPs).
	NodeIPs []netip.Addr
}

// Flow implements flowtest.Model. Masquerade is always reported.
func (m flowModel) Flow(p flowtest.Packet) (flowtest.Expect, error) {
	fam := runner.IPv4
	if p.DstIP.Is6() {
		fam = runner.IPv6
	}
	res, err := m.Fake.Trace(fam, iptablestest.Packet{
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

// TestFlowTableOverKubeProxyRules runs the shared packet-flow table
// through the tracer over hand-written kube-proxy rules for the fixture:
// it checks the tracer and the table against each other, independently of
// switchyard's own renderer.
func TestFlowTableOverKubeProxyRules(t *testing.T) {
	f := iptablestest.NewFake()
	for fam, file := range map[runner.Family]string{runner.IPv4: "testdata/kube-proxy-fixture-ipv4.rules", runner.IPv6: "testdata/kube-proxy-fixture-ipv6.rules"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Restore(context.Background(), fam, data); err != nil {
			t.Fatalf("Restore %s: %v", file, err)
		}
	}
	_, node := flowtest.Fixture()
	flowtest.Run(t, flowModel{Fake: f, NodeIPs: node.NodeIPs})
}
