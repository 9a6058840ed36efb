package flowtest

import (
	"net/netip"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Addresses of the fixture. This node is "node-a" (pods 10.244.1.0/24,
// fd00:10:244:1::/64); "node-b" is another node (10.244.2.0/24,
// fd00:10:244:2::/64). Services live in 10.96.0.0/16 and fd00:10:96::/112.
const (
	thisNode  = "node-a"
	otherNode = "node-b"

	nodeIPv4    = "192.168.0.10"
	nodeIPv6    = "2001:db8::10"
	clusterCIDR = "10.244.0.0/16"
	clusterV6   = "fd00:10:244::/48"

	podClient   = "10.244.1.99"       // a pod on this node, not an endpoint
	podClient6  = "fd00:10:244:1::99" // its IPv6 address
	remotePod   = "10.244.2.99"       // a pod on node-b, routed to this node
	offCIDRPod  = "100.64.1.5"        // a pod on this node outside the cluster CIDR
	podCIDR     = "10.244.1.0/24"     // this node's spec.podCIDRs
	podCIDR6    = "fd00:10:244:1::/64"
	outsider    = "203.0.113.7" // a client outside the cluster
	outsider6   = "2001:db8:ffff::7"
	nonService  = "10.96.0.99" // in the service range, not allocated
	notNodePort = 22
)

// endpoint states of the fixture.
type epState int

const (
	ready           epState = iota
	servingTerm             // terminating but still serving (KEP-1669)
	terminatingDead         // terminating and no longer serving
	notReady                // neither ready nor serving nor terminating
)

func ep(ip string, port uint16, node string, st epState) proxier.Endpoint {
	e := proxier.Endpoint{IP: netip.MustParseAddr(ip), Port: port, NodeName: node, IsLocal: node == thisNode}
	switch st {
	case ready:
		e.Ready, e.Serving = true, true
	case servingTerm:
		e.Serving, e.Terminating = true, true
	case terminatingDead:
		e.Terminating = true
	}
	return e
}

func spn(name, port string, proto v1.Protocol) proxier.ServicePortName {
	return proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}, Port: port, Protocol: proto}
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// fixture builds a State.
type fixture struct{ state *proxier.State }

func (f fixture) add(sp *proxier.ServicePort, eps ...proxier.Endpoint) {
	f.state.Services[sp.Name] = sp
	sort.Slice(eps, func(i, j int) bool { return eps[i].Key().Compare(eps[j].Key()) < 0 })
	f.state.Endpoints[sp.Name] = eps
}

// clusterIPPort is a TCP/UDP service port with one cluster IP.
func clusterIPPort(name, port string, proto v1.Protocol, clusterIP string, p uint16) *proxier.ServicePort {
	return &proxier.ServicePort{Name: spn(name, port, proto), Protocol: proto, Port: p, ClusterIPs: addrs(clusterIP)}
}

// Interfaces of the fixture's node: pods on this node are behind the
// bridge "cbr0" (or, in the InterfaceNamePrefix variant, each on a routed
// veth "cali..."); everything else arrives on the uplink.
const (
	bridge     = "cbr0"
	podVeth    = "cali7f3a9c"
	vethPrefix = "cali"
	uplink     = "eth0"
)

// Variant is one local-traffic detector the table runs with: the backend
// is built with Local, and pods on this node send through PodInterface.
type Variant struct {
	Name         string
	Local        proxier.LocalDetector
	PodInterface string
}

// Variants are the detectors of kube-proxy's --detect-local-mode, and
// ClusterCIDR mode without a cluster CIDR ("none": nothing is local). The
// first is Fixture's.
func Variants() []Variant {
	cidrs := []netip.Prefix{netip.MustParsePrefix(clusterCIDR), netip.MustParsePrefix(clusterV6)}
	return []Variant{
		{"ClusterCIDR", proxier.DetectByClusterCIDRs(cidrs...), bridge},
		{"NodeCIDR", proxier.DetectByNodeCIDR(), bridge},
		{"BridgeInterface", proxier.DetectByBridge(bridge), bridge},
		{"InterfaceNamePrefix", proxier.DetectByInterfacePrefix(vethPrefix), podVeth},
		{"none", proxier.LocalDetector{}, bridge},
	}
}

// Fixture returns a fresh State covering the table's scenarios and the
// node configuration to build the backend with (ClusterCIDR detection).
func Fixture() (*proxier.State, NodeConfig) { return FixtureFor(Variants()[0]) }

// FixtureFor is Fixture with the variant's local-traffic detector.
func FixtureFor(v Variant) (*proxier.State, NodeConfig) {
	state := &proxier.State{
		Services:  map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node: proxier.NodeInfo{Name: thisNode, Addresses: addrs(nodeIPv4, nodeIPv6),
			PodCIDRs: []netip.Prefix{netip.MustParsePrefix(podCIDR), netip.MustParsePrefix(podCIDR6)}},
	}
	f := fixture{state}
	addClusterIPServices(f)
	addExternalServices(f)
	addPolicyServices(f)
	addIPv6Service(f)
	return state, NodeConfig{
		NodeName:      thisNode,
		NodeIPs:       addrs(nodeIPv4, nodeIPv6),
		LocalDetector: v.Local,
		Families:      []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
	}
}

func addClusterIPServices(f fixture) {
	// web: two ports, three ready endpoints plus one serving-terminating
	// (ignored while ready ones exist) and one not ready.
	for _, p := range []struct {
		name         string
		port, target uint16
	}{{"http", 80, 8080}, {"https", 443, 8443}} {
		f.add(clusterIPPort("web", p.name, v1.ProtocolTCP, "10.96.0.10", p.port),
			ep("10.244.1.2", p.target, thisNode, ready), ep("10.244.2.3", p.target, otherNode, ready),
			ep("10.244.2.4", p.target, otherNode, ready), ep("10.244.1.5", p.target, thisNode, servingTerm),
			ep("10.244.2.6", p.target, otherNode, notReady))
	}
	f.add(clusterIPPort("dns", "dns", v1.ProtocolUDP, "10.96.0.53", 53),
		ep("10.244.1.7", 53, thisNode, ready), ep("10.244.2.8", 53, otherNode, ready))
	empty := clusterIPPort("empty", "http", v1.ProtocolTCP, "10.96.0.60", 80)
	empty.NodePort = 30060
	f.add(empty)
	f.add(clusterIPPort("unserving", "http", v1.ProtocolTCP, "10.96.0.65", 80),
		ep("10.244.2.66", 8080, otherNode, terminatingDead), ep("10.244.2.67", 8080, otherNode, notReady))
	f.add(clusterIPPort("terminating", "http", v1.ProtocolTCP, "10.96.0.70", 80),
		ep("10.244.1.71", 8080, thisNode, servingTerm), ep("10.244.2.72", 8080, otherNode, servingTerm),
		ep("10.244.2.73", 8080, otherNode, terminatingDead))
	sticky := clusterIPPort("sticky", "http", v1.ProtocolTCP, "10.96.0.80", 80)
	sticky.AffinityTimeoutSeconds = 10800
	f.add(sticky, ep("10.244.1.81", 8080, thisNode, ready), ep("10.244.2.82", 8080, otherNode, ready))
}

// externalPort is a LoadBalancer-type port: cluster IP, NodePort,
// external IP and load-balancer IP.
func externalPort(name, clusterIP string, nodePort uint16, externalIP, lbIP string) *proxier.ServicePort {
	sp := clusterIPPort(name, "http", v1.ProtocolTCP, clusterIP, 80)
	sp.NodePort = nodePort
	sp.ExternalIPs = addrs(externalIP)
	if lbIP != "" {
		sp.LoadBalancerIPs = addrs(lbIP)
	}
	return sp
}

func addExternalServices(f fixture) {
	f.add(externalPort("lb", "10.96.0.20", 30080, "192.0.2.20", "198.51.100.20"),
		ep("10.244.1.20", 8080, thisNode, ready), ep("10.244.2.21", 8080, otherNode, ready))
	local := externalPort("local", "10.96.0.30", 30030, "192.0.2.30", "198.51.100.30")
	local.ExternalPolicyLocal, local.HealthCheckNodePort = true, 32030
	f.add(local, ep("10.244.1.30", 8080, thisNode, ready), ep("10.244.2.31", 8080, otherNode, ready))
	none := externalPort("local-none", "10.96.0.40", 30040, "192.0.2.40", "")
	none.ExternalPolicyLocal, none.HealthCheckNodePort = true, 32040
	f.add(none, ep("10.244.2.41", 8080, otherNode, ready), ep("10.244.2.42", 8080, otherNode, ready))
}

func addPolicyServices(f fixture) {
	itp := clusterIPPort("itp", "http", v1.ProtocolTCP, "10.96.0.50", 80)
	itp.InternalPolicyLocal = true
	f.add(itp, ep("10.244.1.51", 8080, thisNode, ready), ep("10.244.2.52", 8080, otherNode, ready))
	none := clusterIPPort("itp-none", "http", v1.ProtocolTCP, "10.96.0.55", 80)
	none.InternalPolicyLocal = true
	f.add(none, ep("10.244.2.56", 8080, otherNode, ready))
}

func addIPv6Service(f fixture) {
	sp := clusterIPPort("web6", "http", v1.ProtocolTCP, "fd00:10:96::10", 80)
	sp.NodePort = 30090
	f.add(sp, ep("fd00:10:244:1::2", 8080, thisNode, ready), ep("fd00:10:244:2::3", 8080, otherNode, ready))
}

// Untouched fails t unless st still equals Fixture's State: a backend
// must not write the State it syncs (successive States share their maps
// and endpoint lists with each other and with the trackers).
func Untouched(t testing.TB, st *proxier.State) {
	t.Helper()
	want, _ := Fixture()
	if d := cmp.Diff(want, st, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); d != "" {
		t.Errorf("the backend changed the State it synced (-fixture +after):\n%s", d)
	}
}
