package framework

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestNewTopologyPlanDualStack(t *testing.T) {
	got, err := NewTopologyPlan(TopologySpec{ID: "sy42", Pods: 2, Shape: ShapeDual})
	if err != nil {
		t.Fatal(err)
	}
	wantNets := []Net{
		{Family: corev1.IPv4Protocol, NodeIP: "192.168.77.1", ClientIP: "192.168.77.2", BridgeIP: "10.244.0.1",
			PodCIDR: "10.244.0.0/24", ExtCIDR: "192.168.77.0/24"},
		{Family: corev1.IPv6Protocol, NodeIP: "fd00:77::1", ClientIP: "fd00:77::2", BridgeIP: "fd00:10:244::1",
			PodCIDR: "fd00:10:244::/64", ExtCIDR: "fd00:77::/64"},
	}
	if diff := cmp.Diff(wantNets, got.Nets); diff != "" {
		t.Errorf("Nets (-want +got):\n%s", diff)
	}
	if got.NodeIP != "192.168.77.1" || got.Pods[1].IP != "10.244.0.3" {
		t.Errorf("primary fields: node %s pod1 %s, want the IPv4 ones", got.NodeIP, got.Pods[1].IP)
	}
	if want := []string{"10.244.0.3", "fd00:10:244::3"}; !slices.Equal(got.Pods[1].IPs, want) {
		t.Errorf("pod1 IPs %v, want %v", got.Pods[1].IPs, want)
	}
	v6 := got.For(corev1.IPv6Protocol)
	if v6.NodeIP != "fd00:77::1" || v6.ClientIP != "fd00:77::2" || v6.BridgeIP != "fd00:10:244::1" ||
		v6.PodCIDR != "fd00:10:244::/64" || v6.Pods[0].IP != "fd00:10:244::2" {
		t.Errorf("IPv6 view: %+v", v6)
	}
	if got.Pods[0].IP != "10.244.0.2" {
		t.Errorf("For changed the topology it was called on: pod0 %s", got.Pods[0].IP)
	}
}

func TestNewTopologyPlanIPv6Only(t *testing.T) {
	got, err := NewTopologyPlan(TopologySpec{ID: "sy42", Pods: 1, Shape: ShapeIPv6})
	if err != nil {
		t.Fatal(err)
	}
	if fams := got.Families(); !slices.Equal(fams, []corev1.IPFamily{corev1.IPv6Protocol}) {
		t.Errorf("families %v, want IPv6 only", fams)
	}
	if got.NodeIP != "fd00:77::1" || got.Pods[0].IP != "fd00:10:244::2" || len(got.Pods[0].IPs) != 1 {
		t.Errorf("primary fields of an ipv6 plan: node %s, pod %s %v", got.NodeIP, got.Pods[0].IP, got.Pods[0].IPs)
	}
	if got.For(corev1.IPv4Protocol) != nil {
		t.Error("an ipv6 plan has an IPv4 view")
	}
	for _, argv := range got.SetupCommands() {
		for _, a := range argv {
			if strings.HasPrefix(a, "10.") || strings.HasPrefix(a, "192.168.") {
				t.Errorf("ipv6-only setup uses an IPv4 address: %q", strings.Join(argv, " "))
			}
		}
	}
}

func TestSetupCommandsIPv6(t *testing.T) {
	topo, err := NewTopologyPlan(TopologySpec{ID: "sy7", Pods: 2, Shape: ShapeDual})
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]string, 0)
	for _, argv := range topo.SetupCommands() {
		cmds = append(cmds, strings.Join(argv, " "))
	}
	for _, want := range []string{
		"ip netns exec sy7-pod1 sysctl -q -w net.ipv6.conf.default.accept_dad=0",
		"ip netns exec sy7-node sysctl -q -w net.ipv6.conf.all.forwarding=1",
		"ip netns exec sy7-node sysctl -q -w net.bridge.bridge-nf-call-ip6tables=1",
		"ip -n sy7-node addr add fd00:10:244::1/64 dev br0 nodad",
		"ip -n sy7-pod1 addr add fd00:10:244::3/64 dev eth0 nodad",
		"ip -n sy7-pod1 -6 route add default via fd00:10:244::1",
		"ip -n sy7-client -6 route add default via fd00:77::1",
		"ip -n sy7-node -6 route add default via fd00:77::2",
		// IPv4 is wired as before.
		"ip -n sy7-pod1 addr add 10.244.0.3/24 dev eth0",
		"ip -n sy7-client route add default via 192.168.77.1",
	} {
		if !slices.Contains(cmds, want) {
			t.Errorf("setup lacks %q", want)
		}
	}
	// DAD is off in a namespace before any of its links exists.
	dadOff := map[string]bool{}
	for _, argv := range topo.SetupCommands() {
		ns, _ := scopedNamespace(argv)
		if slices.Contains(argv, "net.ipv6.conf.default.accept_dad=0") {
			dadOff[ns] = true
		}
		if (slices.Contains(argv, "addr") || slices.Contains(argv, "link") && slices.Contains(argv, "add")) && !dadOff[ns] {
			t.Errorf("%q runs before DAD is off in %s", strings.Join(argv, " "), ns)
		}
	}
}

func TestShape(t *testing.T) {
	for _, tc := range []struct {
		shape    Shape
		cidr     string
		policy   corev1.IPFamilyPolicy
		families []corev1.IPFamily
	}{
		{ShapeIPv4, "10.244.0.0/16", "", nil},
		{ShapeIPv6, "fd00:10:244::/48", corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{corev1.IPv6Protocol}},
		{ShapeDual, "10.244.0.0/16,fd00:10:244::/48", corev1.IPFamilyPolicyRequireDualStack,
			[]corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}},
	} {
		if got := tc.shape.ClusterCIDR(); got != tc.cidr {
			t.Errorf("%s: ClusterCIDR %q, want %q", tc.shape, got, tc.cidr)
		}
		svc := NewService("ns", "s")
		tc.shape.ApplyTo(svc)
		var policy corev1.IPFamilyPolicy
		if svc.Spec.IPFamilyPolicy != nil {
			policy = *svc.Spec.IPFamilyPolicy
		}
		if policy != tc.policy || !slices.Equal(svc.Spec.IPFamilies, tc.families) {
			t.Errorf("%s: ApplyTo gave %q %v, want %q %v", tc.shape, policy, svc.Spec.IPFamilies, tc.policy, tc.families)
		}
		ext := NewService("ns", "e")
		ext.Spec.Type = corev1.ServiceTypeExternalName
		if tc.shape.ApplyTo(ext); ext.Spec.IPFamilyPolicy != nil || ext.Spec.IPFamilies != nil {
			t.Errorf("%s: an ExternalName Service got families %v", tc.shape, ext.Spec.IPFamilies)
		}
	}
	if _, err := ParseShape("dual"); err != nil {
		t.Error(err)
	}
	if _, err := ParseShape("ipv5"); err == nil {
		t.Error("ParseShape(ipv5) succeeded")
	}
}

func TestShapesFromEnv(t *testing.T) {
	t.Setenv(ShapesEnv, "")
	if got, err := ShapesFromEnv(AllShapes); err != nil || !slices.Equal(got, AllShapes) {
		t.Errorf("unset: %v %v, want the default", got, err)
	}
	t.Setenv(ShapesEnv, "dual, ipv6")
	if got, err := ShapesFromEnv(AllShapes); err != nil || !slices.Equal(got, []Shape{ShapeDual, ShapeIPv6}) {
		t.Errorf("\"dual, ipv6\": %v %v", got, err)
	}
	t.Setenv(ShapesEnv, "ipv4,v6")
	if _, err := ShapesFromEnv(AllShapes); err == nil {
		t.Error("a bad shape name was accepted")
	}
}

func TestFamilySlices(t *testing.T) {
	topo, err := NewTopologyPlan(TopologySpec{ID: "sy7", Pods: 2, Shape: ShapeDual})
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Topo: topo}
	svc := NewService("ns", "web")
	if a, b := env.SliceName(svc, "1", corev1.IPv4Protocol), env.SliceName(svc, "1", corev1.IPv6Protocol); a != "web-1" || b != "web-1-ipv6" {
		t.Errorf("slice names %q %q, want web-1 web-1-ipv6", a, b)
	}
	eps := PodEndpointsOf(corev1.IPv6Protocol, "n1", topo.Pods...)
	if eps[1].Addresses[0] != "fd00:10:244::3" || *eps[1].NodeName != "n1" {
		t.Errorf("IPv6 endpoint of pod1: %v on %s", eps[1].Addresses, *eps[1].NodeName)
	}
	if s := NewEndpointSlice(svc, "1", nil, eps...); s.AddressType != "IPv6" {
		t.Errorf("slice of IPv6 endpoints has address type %s", s.AddressType)
	}
	if s := NewEndpointSlice(svc, "1", nil, PodEndpoints("n1", topo.Pods...)...); s.AddressType != "IPv4" {
		t.Errorf("slice of IPv4 endpoints has address type %s", s.AddressType)
	}
	v6 := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.5", ClusterIPs: []string{"10.96.0.5", "fd00:10:96::5"}}}
	if ClusterIPOf(v6, corev1.IPv6Protocol) != "fd00:10:96::5" || ClusterIPOf(v6, corev1.IPv4Protocol) != "10.96.0.5" {
		t.Errorf("ClusterIPOf %v", v6.Spec.ClusterIPs)
	}
}
