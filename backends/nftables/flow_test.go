package nftables_test

import (
	"context"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	nfttest "github.com/switchyard-proxy/switchyard/backends/nftables/testing"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

func flowBackend(t *testing.T, fake *nfttest.Fake, node flowtest.NodeConfig) *nftables.Backend {
	t.Helper()
	b, err := nftables.New(nftables.Config{
		Families:      []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
		ClusterCIDRs:  node.ClusterCIDRs,
		MasqueradeAll: node.MasqueradeAll,
		Conn:          fake,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSync(t *testing.T, b *nftables.Backend, st *proxier.State, d *proxier.Diff) proxier.SyncResult {
	t.Helper()
	res, err := b.Sync(context.Background(), st, d)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return res
}

func fullDiff() *proxier.Diff { return &proxier.Diff{Full: true} }

// TestFlowTable runs the shared packet-flow table through the tracer over
// what a full sync of the fixture wrote.
func TestFlowTable(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nfttest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	flowtest.Run(t, nfttest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs})
}

// TestNodePortAddresses: with --nodeport-addresses, NodePorts answer only
// on local addresses inside the prefixes.
func TestNodePortAddresses(t *testing.T) {
	state, node := flowtest.Fixture()
	for _, tc := range []struct {
		prefix  string
		served  bool
		comment string
	}{{"192.168.0.0/24", true, "node IP inside"}, {"10.200.0.0/16", false, "node IP outside"}} {
		fake := nfttest.NewFake()
		b, err := nftables.New(nftables.Config{Families: []v1.IPFamily{v1.IPv4Protocol}, ClusterCIDRs: node.ClusterCIDRs,
			NodePortAddresses: []netip.Prefix{netip.MustParsePrefix(tc.prefix)}, Conn: fake})
		if err != nil {
			t.Fatal(err)
		}
		mustSync(t, b, state, fullDiff())
		got, err := nfttest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs}.Flow(flowtest.Packet{
			SrcIP: netip.MustParseAddr("203.0.113.7"), DstIP: netip.MustParseAddr("192.168.0.10"), DstPort: 30080, Protocol: v1.ProtocolTCP})
		if err != nil {
			t.Fatal(err)
		}
		if served := len(got.Endpoints) > 0; served != tc.served {
			t.Errorf("%s (%s): NodePort reached %v, want served=%v", tc.prefix, tc.comment, got.Endpoints, tc.served)
		}
	}
}
