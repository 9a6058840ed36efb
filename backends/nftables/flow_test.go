package nftables_test

import (
	"context"
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
