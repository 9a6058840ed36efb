package iptables

import (
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// flowConfig builds the backend the way flowtest.Fixture's node expects.
func flowConfig(node flowtest.NodeConfig) func(*Config) {
	return func(c *Config) {
		c.Families = node.Families
		c.LocalDetector = node.LocalDetector
		c.MasqueradeAll = node.MasqueradeAll
	}
}

// TestFlowTable runs the shared packet-flow table through the fake's
// tracer over what a full sync of the fixture installed.
func TestFlowTable(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := iptablestest.NewFake()
	mustSync(t, newTestBackend(t, fake, flowConfig(node)), state, fullDiff())
	flowtest.Run(t, flowModel{Fake: fake, NodeIPs: node.NodeIPs})
	flowtest.Untouched(t, state)
}

// TestFlowTableByDetector runs the table once per local-traffic
// detector: "-s CIDR" or "-i cbr0" / "-i cali+" decide masquerading and
// the pod short-circuit.
func TestFlowTableByDetector(t *testing.T) {
	flowtest.RunDetectors(t, func(t *testing.T, state *proxier.State, node flowtest.NodeConfig) flowtest.Model {
		fake := iptablestest.NewFake()
		mustSync(t, newTestBackend(t, fake, flowConfig(node)), state, fullDiff())
		return flowModel{Fake: fake, NodeIPs: node.NodeIPs}
	})
}

// TestFlowTableShapes runs the table on single-stack IPv4, single-stack
// IPv6 and dual-stack nodes (with every detector, "none" being a node
// without any cluster CIDR): each family in ip(6)tables of its own, the
// other family's addresses of a dual-stack Service left alone.
func TestFlowTableShapes(t *testing.T) {
	flowtest.RunShapes(t, func(t *testing.T, state *proxier.State, node flowtest.NodeConfig) flowtest.Model {
		fake := iptablestest.NewFake()
		mustSync(t, newTestBackend(t, fake, flowConfig(node)), state, fullDiff())
		return flowModel{Fake: fake, NodeIPs: node.NodeIPs}
	})
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

	flowtest.Run(t, flowModel{Fake: fake, NodeIPs: node.NodeIPs})
	assertMatchesReference(t, fake, flowConfig(node), state)
}

// TestNodeCIDRArrivesLater: in NodeCIDR mode the node may have no pod
// CIDR at the first sync (nothing is local yet); once it has one, the next
// sync rewrites the rules with the new match even if the Diff only names
// an endpoint change, and pod traffic is then told apart.
func TestNodeCIDRArrivesLater(t *testing.T) {
	v := flowtest.Variants()[1]
	state, node := flowtest.FixtureFor(v)
	if node.LocalDetector.Mode != proxier.LocalModeNodeCIDR {
		t.Fatalf("variant 1 is %v", node.LocalDetector)
	}
	fake := iptablestest.NewFake()
	b := newTestBackend(t, fake, flowConfig(node))
	early := cloneState(state)
	early.Node.PodCIDRs = nil
	mustSync(t, b, early, fullDiff())
	if dump := fake.Dump(runner.IPv4, "nat"); strings.Contains(dump, "10.244.1.0/24") {
		t.Fatalf("a pod CIDR is matched before the node has one:\n%s", dump)
	}
	var some proxier.ServicePortName
	for n := range state.Services {
		some = n
		break
	}
	if res := mustSync(t, b, state, changedDiff(false, some)); !res.Full {
		t.Error("the pod CIDR's arrival did not make the sync full")
	}
	if dump := fake.Dump(runner.IPv4, "nat"); !strings.Contains(dump, "! -s 10.244.1.0/24 -d 10.96.0.10/32") {
		t.Errorf("no masquerade rule for sources outside the node's pod CIDR:\n%s", dump)
	}
	flowtest.RunVariant(t, v, flowModel{Fake: fake, NodeIPs: node.NodeIPs})
}
