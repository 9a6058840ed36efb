package framework

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestNewTopologyPlanAddresses(t *testing.T) {
	got, err := NewTopologyPlan(TopologySpec{ID: "sy42", Pods: 3})
	if err != nil {
		t.Fatal(err)
	}
	v4 := Net{Family: corev1.IPv4Protocol, NodeIP: "192.168.77.1", ClientIP: "192.168.77.2", BridgeIP: "10.244.0.1",
		PodCIDR: "10.244.0.0/24", ExtCIDR: "192.168.77.0/24"}
	want := &Topology{
		ID: "sy42", NodeNS: "sy42-node", ClientNS: "sy42-client", NodeName: "sy42-node",
		NodeIP: "192.168.77.1", ClientIP: "192.168.77.2", BridgeIP: "10.244.0.1",
		PodCIDR: "10.244.0.0/24", ExtCIDR: "192.168.77.0/24",
		Pods: []Pod{
			{Name: "pod0", NS: "sy42-pod0", IP: "10.244.0.2", IPs: []string{"10.244.0.2"}},
			{Name: "pod1", NS: "sy42-pod1", IP: "10.244.0.3", IPs: []string{"10.244.0.3"}},
			{Name: "pod2", NS: "sy42-pod2", IP: "10.244.0.4", IPs: []string{"10.244.0.4"}},
		},
		Shape: ShapeIPv4,
		Nets:  []Net{v4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan mismatch (-want +got):\n%s", diff)
	}
	wantNS := []string{"sy42-node", "sy42-client", "sy42-pod0", "sy42-pod1", "sy42-pod2"}
	if diff := cmp.Diff(wantNS, got.Namespaces()); diff != "" {
		t.Errorf("Namespaces() (-want +got):\n%s", diff)
	}
}

func TestNewTopologyPlanErrors(t *testing.T) {
	tests := map[string]TopologySpec{
		"no id":              {Pods: 1},
		"pod cidr too small": {ID: "x", Pods: 2, PodCIDR: "10.1.0.0/30"},
		"ipv6 pod cidr":      {ID: "x", Pods: 1, PodCIDR: "fd00::/64"},
		"garbage ext cidr":   {ID: "x", Pods: 1, ExtCIDR: "nope"},
		"unknown shape":      {ID: "x", Pods: 1, Shape: "ipv5"},
	}
	for name, spec := range tests {
		if _, err := NewTopologyPlan(spec); err == nil {
			t.Errorf("%s: NewTopologyPlan(%+v) succeeded, want error", name, spec)
		}
	}
}

// TestSetupCommandsStayInsideOwnNamespaces is the safety check: apart from
// creating its namespaces, every command must be scoped to one of them.
func TestSetupCommandsStayInsideOwnNamespaces(t *testing.T) {
	topo, err := NewTopologyPlan(TopologySpec{ID: "sy7", Pods: 2})
	if err != nil {
		t.Fatal(err)
	}
	own := topo.Namespaces()
	for _, argv := range append(topo.SetupCommands(), topo.TeardownCommands()...) {
		ns, ok := scopedNamespace(argv)
		if !ok || !slices.Contains(own, ns) {
			t.Errorf("command %q is not scoped to a topology namespace", strings.Join(argv, " "))
		}
	}
}

// scopedNamespace returns the namespace an ip(8) command acts in.
func scopedNamespace(argv []string) (string, bool) {
	switch {
	case len(argv) >= 4 && argv[0] == "ip" && argv[1] == "-n":
		return argv[2], true
	case len(argv) == 4 && argv[0] == "ip" && argv[1] == "netns" && (argv[2] == "add" || argv[2] == "del"):
		return argv[3], true
	case len(argv) >= 5 && argv[0] == "ip" && argv[1] == "netns" && argv[2] == "exec":
		return argv[3], true
	}
	return "", false
}

func TestSetupCommandsWiring(t *testing.T) {
	topo, err := NewTopologyPlan(TopologySpec{ID: "sy7", Pods: 2})
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]string, 0)
	for _, argv := range topo.SetupCommands() {
		cmds = append(cmds, strings.Join(argv, " "))
	}
	for _, want := range []string{
		"ip netns add sy7-node",
		"ip netns exec sy7-node sysctl -q -w net.ipv4.ip_forward=1",
		"ip -n sy7-node addr add 10.244.0.1/24 dev br0",
		"ip -n sy7-node link add veth-pod1 type veth peer name eth0 netns sy7-pod1",
		"ip -n sy7-node link set veth-pod1 master br0",
		"ip -n sy7-pod1 addr add 10.244.0.3/24 dev eth0",
		"ip -n sy7-pod1 route add default via 10.244.0.1",
		"ip -n sy7-node addr add 192.168.77.1/24 dev veth-client",
		"ip -n sy7-client addr add 192.168.77.2/24 dev eth0",
		"ip -n sy7-client route add default via 192.168.77.1",
	} {
		if !slices.Contains(cmds, want) {
			t.Errorf("setup lacks %q", want)
		}
	}
	// A namespace must exist before any command uses it.
	added := map[string]bool{}
	for _, argv := range topo.SetupCommands() {
		ns, _ := scopedNamespace(argv)
		if argv[1] == "netns" && argv[2] == "add" {
			added[ns] = true
		} else if !added[ns] {
			t.Errorf("%q runs before namespace %s is created", strings.Join(argv, " "), ns)
		}
	}
}

func TestInterfaceNamesFitKernelLimit(t *testing.T) {
	topo, err := NewTopologyPlan(TopologySpec{ID: "sy7", Pods: 250, PodCIDR: "10.244.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, argv := range topo.SetupCommands() {
		for i := 1; i+1 < len(argv); i++ {
			isLinkAdd := argv[i-1] == "link" && argv[i] == "add"
			isPeerName := argv[i-1] == "peer" && argv[i] == "name"
			if !isLinkAdd && !isPeerName {
				continue
			}
			n++
			if name := argv[i+1]; len(name) > 15 {
				t.Errorf("interface name %q is longer than IFNAMSIZ-1 (15)", name)
			}
		}
	}
	if want := 1 + 2*251; n != want {
		t.Errorf("checked %d interface names, want %d (bridge + two veth ends per pod and client)", n, want)
	}
}
