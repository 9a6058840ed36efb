package nftables_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// flowBackend is the backend a flow fixture's node asks for (its
// families, detector and masquerade-all) over any conn.
func flowBackend(t *testing.T, conn nftables.Conn, node flowtest.NodeConfig) *nftables.Backend {
	t.Helper()
	b, err := nftables.New(nftables.Config{
		Families:      node.Families,
		LocalDetector: node.LocalDetector,
		MasqueradeAll: node.MasqueradeAll,
		Conn:          conn,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSync(t *testing.T, b *nftables.Backend, st *proxier.State, d *proxier.Diff) proxier.SyncResult {
	t.Helper()
	res, err := syncTracked(b, st, d)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return res
}

// synced holds the State each backend last synced: a Diff built by hand
// gets from it what the proxier's snapshots record (Diff.Previous).
var synced sync.Map // *nftables.Backend -> *proxier.State

// syncTracked syncs st with d, d's previous State being the one b last
// synced.
func syncTracked(b *nftables.Backend, st *proxier.State, d *proxier.Diff) (proxier.SyncResult, error) {
	prev, _ := synced.Load(b)
	p, _ := prev.(*proxier.State)
	d.SetPrevious(p)
	res, err := b.Sync(context.Background(), st, d)
	if err == nil {
		synced.Store(b, st)
	}
	return res, err
}

func fullDiff() *proxier.Diff { return &proxier.Diff{Full: true} }

// TestFlowTable runs the shared packet-flow table through the tracer over
// what a full sync of the fixture wrote.
func TestFlowTable(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	flowtest.Run(t, nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs})
	flowtest.Untouched(t, state)
}

// TestFlowTableByDetector runs the table once per local-traffic
// detector: "ip saddr CIDR", `iifname "cbr0"` or `iifname "cali*"`
// decide masquerading and the pod short-circuit.
func TestFlowTableByDetector(t *testing.T) {
	flowtest.RunDetectors(t, func(t *testing.T, state *proxier.State, node flowtest.NodeConfig) flowtest.Model {
		fake := nftablestest.NewFake()
		mustSync(t, flowBackend(t, fake, node), state, fullDiff())
		return nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs}
	})
}

// TestFlowTableShapes runs the table on single-stack IPv4, single-stack
// IPv6 and dual-stack nodes, with every detector ("none" being a node
// without any cluster CIDR): a table per family programmed, none for the
// other, whose addresses of dual-stack Services go untouched.
func TestFlowTableShapes(t *testing.T) {
	flowtest.RunShapes(t, func(t *testing.T, state *proxier.State, node flowtest.NodeConfig) flowtest.Model {
		fake := nftablestest.NewFake()
		mustSync(t, flowBackend(t, fake, node), state, fullDiff())
		return nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs}
	})
}

// TestNodeCIDRArrivesLater: in NodeCIDR mode a pod CIDR that the node
// gets after the first sync makes the next sync full, even when the Diff
// names one port, and the rules then tell this node's pods apart.
func TestNodeCIDRArrivesLater(t *testing.T) {
	v := flowtest.Variants()[1]
	state, node := flowtest.FixtureFor(v)
	fake := nftablestest.NewFake()
	b := flowBackend(t, fake, node)
	early := *state
	early.Node.PodCIDRs = nil
	mustSync(t, b, &early, fullDiff())
	var some proxier.ServicePortName
	for n := range state.Services {
		some = n
		break
	}
	diff := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{some: {}}}
	if res := mustSync(t, b, state, diff); !res.Full {
		t.Error("the pod CIDR's arrival did not make the sync full")
	}
	flowtest.RunVariant(t, v, nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs})
}

// TestNodePortAddresses: with --nodeport-addresses, NodePorts answer only
// on local addresses inside the prefixes, and never on loopback in the
// kernel (a loopback destination DNATed to a pod is never routed without
// route_localnet; the localhost relay serves it instead).
func TestNodePortAddresses(t *testing.T) {
	state, node := flowtest.Fixture()
	for _, tc := range []struct {
		prefixes []string
		served   bool
		comment  string
	}{
		{[]string{"192.168.0.0/24"}, true, "node IP inside"},
		{[]string{"10.200.0.0/16"}, false, "node IP outside"},
		{[]string{"0.0.0.0/0"}, true, "all"},
		{[]string{"127.0.0.0/8", "192.168.0.10/32"}, true, "localhost and the node IP"},
		{[]string{"127.0.0.0/8"}, false, "localhost only"},
		{nil, true, "unset"},
	} {
		var prefixes []netip.Prefix
		for _, p := range tc.prefixes {
			prefixes = append(prefixes, netip.MustParsePrefix(p))
		}
		fake := nftablestest.NewFake()
		b, err := nftables.New(nftables.Config{Families: []v1.IPFamily{v1.IPv4Protocol}, LocalDetector: node.LocalDetector,
			NodePortAddresses: prefixes, Conn: fake})
		if err != nil {
			t.Fatal(err)
		}
		mustSync(t, b, state, fullDiff())
		for _, dst := range []string{"192.168.0.10", "127.0.0.1"} {
			got, err := nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs}.Flow(flowtest.Packet{
				SrcIP: netip.MustParseAddr("203.0.113.7"), DstIP: netip.MustParseAddr(dst), DstPort: 30080, Protocol: v1.ProtocolTCP})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.served && dst != "127.0.0.1"
			if served := len(got.Endpoints) > 0; served != want {
				t.Errorf("%v (%s): NodePort on %s reached %v, want served=%v", tc.prefixes, tc.comment, dst, got.Endpoints, want)
			}
		}
	}
}

// TestLoadBalancerSourceRanges: only sources inside loadBalancerSourceRanges
// reach the load-balancer IP; the cluster IP stays open.
func TestLoadBalancerSourceRanges(t *testing.T) {
	state, node := flowtest.Fixture()
	name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "fw"}, Port: "http", Protocol: v1.ProtocolTCP}
	state.Services[name] = &proxier.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: 80,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.90")}, NodePort: 30095,
		LoadBalancerIPs:          []netip.Addr{netip.MustParseAddr("198.51.100.90")},
		LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	state.Endpoints[name] = []proxier.Endpoint{{IP: netip.MustParseAddr("10.244.2.91"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b"}}
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	m := nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs}
	for _, tc := range []struct {
		src, dst string
		want     flowtest.Expect
	}{
		{"203.0.113.7", "198.51.100.90", flowtest.Expect{Endpoints: []string{"10.244.2.91:8080"}}},
		{"198.18.0.1", "198.51.100.90", flowtest.Expect{Drop: true}},
		{"198.18.0.1", "10.96.0.90", flowtest.Expect{Endpoints: []string{"10.244.2.91:8080"}}},
	} {
		got, err := m.Flow(flowtest.Packet{SrcIP: netip.MustParseAddr(tc.src), DstIP: netip.MustParseAddr(tc.dst), DstPort: 80, Protocol: v1.ProtocolTCP})
		if err != nil {
			t.Fatal(err)
		}
		if d := flowtest.Diff(tc.want, got); d != "" {
			t.Errorf("%s -> %s (-want +got):\n%s", tc.src, tc.dst, d)
		}
	}
}
