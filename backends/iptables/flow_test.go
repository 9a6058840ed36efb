package iptables

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	iptablestest "github.com/switchyard-proxy/switchyard/backends/iptables/testing"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// flowConfig builds the backend the way flowtest.Fixture's node expects.
func flowConfig(node flowtest.NodeConfig) func(*Config) {
	return func(c *Config) {
		c.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		c.ClusterCIDRs = node.ClusterCIDRs
		c.MasqueradeAll = node.MasqueradeAll
	}
}

// TestFlowTable runs the shared packet-flow table through the fake's
// tracer over what a full sync of the fixture installed.
func TestFlowTable(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := iptablestest.NewFake()
	mustSync(t, newTestBackend(t, fake, flowConfig(node)), state, fullDiff())
	flowtest.Run(t, iptablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs})
}

// TestFlowTableAfterPartialSyncs reaches the fixture through partial
// syncs from an empty state and from a scrambled one: the rules in force
// must behave the same as after a full sync.
func TestFlowTableAfterPartialSyncs(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := iptablestest.NewFake()
	b := newTestBackend(t, fake, flowConfig(node))

	// Start from the fixture with every endpoint list emptied...
	empty := cloneState(state)
	for n := range empty.Endpoints {
		empty.Endpoints[n] = nil
	}
	mustSync(t, b, empty, fullDiff())
	// ...then restore the endpoints one service port at a time.
	cur := cloneState(empty)
	for n, eps := range state.Endpoints {
		cur = cloneState(cur)
		cur.Endpoints[n] = eps
		if res := mustSync(t, b, cur, changedDiff(false, n)); res.Full {
			t.Fatalf("partial sync of %s went full", n)
		}
	}
	// And a service removed and added back.
	var some proxier.ServicePortName
	for n := range state.Services {
		some = n
		break
	}
	gone := cloneState(cur)
	delete(gone.Services, some)
	delete(gone.Endpoints, some)
	mustSync(t, b, gone, changedDiff(true, some))
	mustSync(t, b, state, changedDiff(true, some))

	flowtest.Run(t, iptablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs})
	assertMatchesReference(t, fake, flowConfig(node), state)
}
