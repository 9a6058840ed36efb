package iptablestest

import (
	"os"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestFlowTableOverKubeProxyRules runs the shared packet-flow table
// through the tracer over hand-written kube-proxy rules for the fixture:
// it checks the tracer and the table against each other, independently of
// switchyard's own renderer.
func TestFlowTableOverKubeProxyRules(t *testing.T) {
	f := NewFake()
	for fam, file := range map[runner.Family]string{runner.IPv4: "testdata/fixture-ipv4.rules", runner.IPv6: "testdata/fixture-ipv6.rules"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		mustRestore(t, f, fam, string(data))
	}
	_, node := flowtest.Fixture()
	flowtest.Run(t, FlowModel{Fake: f, NodeIPs: node.NodeIPs})
}
