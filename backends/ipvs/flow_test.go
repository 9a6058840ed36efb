package ipvs_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	ipvstest "github.com/switchyard-proxy/switchyard/backends/ipvs/testing"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestPacketFlows runs the shared packet-flow table against what the
// backend programmed: IPVS virtual servers plus the companion iptables
// rules and sets, traced by ipvstest.FlowModel.
func TestPacketFlows(t *testing.T) {
	state, node := flowtest.Fixture()
	k := ipvstest.NewKernel()
	b, err := ipvs.New(ipvs.Config{
		Kernel:        k.Kernel,
		Families:      []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
		ClusterCIDRs:  node.ClusterCIDRs,
		MasqueradeAll: node.MasqueradeAll,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := b.Sync(context.Background(), state, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	flowtest.Run(t, k.FlowModel(node.NodeIPs))
}
