package proxier

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestLocalDetectorMatch(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")
	node := NodeInfo{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}
	tests := []struct {
		name   string
		d      LocalDetector
		family v1.IPFamily
		want   LocalMatch
	}{
		{"zero value: ClusterCIDR without CIDRs detects nothing", LocalDetector{}, v1.IPv4Protocol, LocalMatch{}},
		{"empty mode is ClusterCIDR", LocalDetector{ClusterCIDRs: []netip.Prefix{v4}}, v1.IPv4Protocol, LocalMatch{CIDR: v4}},
		{"ClusterCIDR takes the CIDR of the family", DetectByClusterCIDRs(v4, v6), v1.IPv6Protocol, LocalMatch{CIDR: v6}},
		{"ClusterCIDR: no CIDR of the family detects nothing", DetectByClusterCIDRs(v4), v1.IPv6Protocol, LocalMatch{}},
		{"ClusterCIDR masks", DetectByClusterCIDRs(netip.MustParsePrefix("10.244.3.4/16")), v1.IPv4Protocol, LocalMatch{CIDR: v4}},
		{"NodeCIDR takes the node's pod CIDR", DetectByNodeCIDR(), v1.IPv4Protocol, LocalMatch{CIDR: node.PodCIDRs[0]}},
		{"NodeCIDR: none of the family yet detects nothing", DetectByNodeCIDR(), v1.IPv6Protocol, LocalMatch{}},
		{"BridgeInterface, either family", DetectByBridge("cbr0"), v1.IPv6Protocol, LocalMatch{Interface: "cbr0"}},
		{"InterfaceNamePrefix", DetectByInterfacePrefix("cali"), v1.IPv4Protocol, LocalMatch{Interface: "cali", Prefix: true}},
	}
	for _, tc := range tests {
		if got := tc.d.Match(tc.family, node); got != tc.want {
			t.Errorf("%s: Match = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestLocalMatchIsLocal(t *testing.T) {
	pod, outsider := netip.MustParseAddr("10.244.1.9"), netip.MustParseAddr("203.0.113.7")
	tests := []struct {
		m        LocalMatch
		src      netip.Addr
		iif      string
		want     bool
		whatItIs string
	}{
		{LocalMatch{}, pod, "cbr0", false, "no detector: nothing is local"},
		{LocalMatch{CIDR: netip.MustParsePrefix("10.244.0.0/16")}, pod, "eth0", true, "CIDR ignores the interface"},
		{LocalMatch{CIDR: netip.MustParsePrefix("10.244.0.0/16")}, outsider, "cbr0", false, "CIDR: outside source"},
		{LocalMatch{CIDR: netip.MustParsePrefix("10.244.0.0/16")}, netip.MustParseAddr("::ffff:10.244.1.9"), "", true, "mapped address unmapped"},
		{LocalMatch{Interface: "cbr0"}, outsider, "cbr0", true, "bridge: any source on the bridge"},
		{LocalMatch{Interface: "cbr0"}, pod, "cbr01", false, "bridge: exact name"},
		{LocalMatch{Interface: "cbr0"}, pod, "", false, "bridge: node-originated traffic has no input interface"},
		{LocalMatch{Interface: "cali", Prefix: true}, pod, "cali12ab", true, "prefix matches"},
		{LocalMatch{Interface: "cali", Prefix: true}, pod, "eth0", false, "prefix does not match"},
	}
	for _, tc := range tests {
		if got := tc.m.IsLocal(tc.src, tc.iif); got != tc.want {
			t.Errorf("%s: IsLocal(%v, %q) = %v", tc.whatItIs, tc.src, tc.iif, got)
		}
	}
}

func TestLocalDetectorValidate(t *testing.T) {
	tests := []struct {
		d       LocalDetector
		wantErr string
	}{
		{LocalDetector{}, ""},
		{DetectByNodeCIDR(), ""},
		{DetectByBridge("cbr0"), ""},
		{DetectByInterfacePrefix("cali"), ""},
		{DetectByBridge(""), "must not be empty"},
		{DetectByInterfacePrefix(""), "must not be empty"},
		{DetectByBridge("a-bridge-name-16"), "at most 15 characters"},
		{DetectByBridge("br-name-15-char"), ""},
		{DetectByInterfacePrefix("prefix-15-chars"), "at most 14 characters"},
		{DetectByInterfacePrefix("cali+"), "must not contain"},
		{DetectByBridge("br 0"), "must not contain"},
		{LocalDetector{Mode: "PodCIDR"}, `unknown local-traffic detection mode "PodCIDR"`},
	}
	for _, tc := range tests {
		err := tc.d.Validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%v: Validate() = %v, want %q", tc.d, err, tc.wantErr)
		}
	}
}

func TestLocalDetectorNeedsNodePodCIDRs(t *testing.T) {
	for _, d := range []LocalDetector{{}, DetectByBridge("br0"), DetectByInterfacePrefix("cali"), DetectByClusterCIDRs()} {
		if d.NeedsNodePodCIDRs() {
			t.Errorf("%v needs the node's pod CIDRs", d)
		}
	}
	if !DetectByNodeCIDR().NeedsNodePodCIDRs() {
		t.Error("NodeCIDR does not need the node's pod CIDRs")
	}
}
