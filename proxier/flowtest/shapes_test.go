package flowtest

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

func TestTo6(t *testing.T) {
	for in, want := range map[string]string{
		"10.244.1.30": "fd00:10:244:1::30", "10.96.0.10": "fd00:10:96::10", "10.96.1.5": "fd00:10:96::1:5",
		"192.168.0.10": nodeIPv6, "203.0.113.7": outsider6, "192.0.2.40": "2001:db8:2::40",
		"198.51.100.30": "2001:db8:5100::30", "100.64.1.5": "fd64:1::5", "fd00::1": "fd00::1",
	} {
		if got := to6(netip.MustParseAddr(in)); got != netip.MustParseAddr(want) {
			t.Errorf("to6(%s) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{
		clusterCIDR: "fd00:10:244::/48", podCIDR: podCIDR6, "203.0.113.0/24": "2001:db8:ffff::/64", "192.0.2.40/32": "2001:db8:2::40/128",
	} {
		if got := to6Prefix(netip.MustParsePrefix(in)); got != netip.MustParsePrefix(want) {
			t.Errorf("to6Prefix(%s) = %s, want %s", in, got, want)
		}
	}
	// The twins keep the fixture's own IPv6 ranges.
	if !netip.MustParsePrefix(clusterV6).Contains(to6(netip.MustParseAddr(podClient))) {
		t.Errorf("the pod client's twin is outside %s", clusterV6)
	}
}

// TestShapeCases: every shape has unique case names, packets only of the
// families it programs (but for the not-programmed rows), and a state of
// those families' endpoints.
func TestShapeCases(t *testing.T) {
	for _, s := range Shapes() {
		state, node := ShapeFixture(s, Variants()[0])
		seen := map[string]bool{}
		for _, c := range ShapeCases(s, Variants()[0]) {
			if seen[c.Name] {
				t.Errorf("%s: case %q twice", s.Name, c.Name)
			}
			seen[c.Name] = true
			fam := proxier.FamilyOf(c.Packet.DstIP)
			if !s.has(fam) != strings.HasPrefix(c.Name, "not programmed") {
				t.Errorf("%s: case %q sends %s", s.Name, c.Name, fam)
			}
		}
		for name, eps := range state.Endpoints {
			for _, e := range eps {
				if !s.has(proxier.FamilyOf(e.IP)) {
					t.Errorf("%s: %s has endpoint %s", s.Name, name, e.IP)
				}
			}
		}
		if len(node.NodeIPs) != len(s.Families) || len(node.Families) != len(s.Families) {
			t.Errorf("%s: node %v", s.Name, node)
		}
		if _, web6 := state.Services[spn("web6", "http", v1.ProtocolTCP)]; web6 != s.has(v1.IPv6Protocol) {
			t.Errorf("%s: single-stack IPv6 service present = %v", s.Name, web6)
		}
		if _, web4 := state.Services[spn("web4", "http", v1.ProtocolTCP)]; web4 != s.has(v1.IPv4Protocol) {
			t.Errorf("%s: single-stack IPv4 service present = %v", s.Name, web4)
		}
	}
}
