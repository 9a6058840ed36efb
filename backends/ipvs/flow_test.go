package ipvs_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipvstest"
	"github.com/switchyard-proxy/switchyard/proxier"
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
		LocalDetector: node.LocalDetector,
		MasqueradeAll: node.MasqueradeAll,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := b.Sync(context.Background(), state, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	flowtest.Run(t, k.FlowModel(node.NodeIPs))
	flowtest.Untouched(t, state)
}

// TestPacketFlowsShapes runs the table on single-stack IPv4, single-stack
// IPv6 and dual-stack nodes, with every detector ("none" being a node
// without any cluster CIDR).
func TestPacketFlowsShapes(t *testing.T) {
	flowtest.RunShapes(t, syncedFlowModel, nodeMasqueradedWithoutDetector)
}

// syncedFlowModel is the model of a backend built as node asks (its
// families, detector and masquerade-all) and synced with state.
func syncedFlowModel(t *testing.T, state *proxier.State, node flowtest.NodeConfig) flowtest.Model {
	k := ipvstest.NewKernel()
	b, err := ipvs.New(ipvs.Config{Kernel: k.Kernel, Families: node.Families,
		LocalDetector: node.LocalDetector, MasqueradeAll: node.MasqueradeAll})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := b.Sync(context.Background(), state, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return k.FlowModel(node.NodeIPs)
}

// nodeMasqueradedWithoutDetector is ipvs mode's departure from the table.
var nodeMasqueradedWithoutDetector = flowtest.Deviation{Variant: "none", Case: "node to cluster IP is masqueraded",
	Expect: flowtest.Expect{Endpoints: []string{"10.244.1.2:8080", "10.244.2.3:8080", "10.244.2.4:8080"}, Masquerade: true, MasqChecked: true},
	Why:    "without a detector the node's own traffic to cluster IPs is masqueraded (kube-proxy: only with a VIP source)"}

// TestPacketFlowsByDetector runs the table once per local-traffic
// detector: the companion rules' "-s CIDR", "-i cbr0" or "-i cali+"
// decide masquerading and which traffic takes the internal fwmark
// services.
func TestPacketFlowsByDetector(t *testing.T) {
	flowtest.RunDetectors(t, syncedFlowModel, nodeMasqueradedWithoutDetector)
}
