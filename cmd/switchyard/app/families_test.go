package app

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// fakeProbe answers as a node with the given tools and kernel.
type fakeProbe struct {
	noIPTables  bool // no iptables at all
	noIP6Tables bool
	noKernelV6  bool
}

func (p fakeProbe) IPTables(f v1.IPFamily) error {
	if p.noIPTables || (f == v1.IPv6Protocol && p.noIP6Tables) {
		return errors.New("iptables: not found")
	}
	return nil
}

func (p fakeProbe) KernelIPv6() error {
	if p.noKernelV6 {
		return errors.New("IPv6 is disabled")
	}
	return nil
}

var (
	v4  = v1.IPv4Protocol
	v6  = v1.IPv6Protocol
	all = []Mode{ModeIPTables, ModeNFTables, ModeUserspace, ModeIPVS}
)

// TestDecideFamilies: the node's shape and its tools decide, as in
// kube-proxy, in every mode; the cluster CIDRs never do.
func TestDecideFamilies(t *testing.T) {
	dualCIDRs := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}
	v4CIDR := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	for _, tc := range []struct {
		name    string
		nodeIPs []netip.Addr
		bind    string
		cidrs   []netip.Prefix
		probe   fakeProbe
		modes   []Mode
		want    []v1.IPFamily
	}{
		{"single-stack ipv4 (no ip6tables)", addrs("192.0.2.10"), "", v4CIDR, fakeProbe{noIP6Tables: true}, []Mode{ModeIPTables, ModeUserspace, ModeIPVS}, []v1.IPFamily{v4}},
		{"single-stack ipv4 (IPv6 off in the kernel)", addrs("192.0.2.10"), "", v4CIDR, fakeProbe{noKernelV6: true}, all, []v1.IPFamily{v4}},
		{"ipv4 node, both supported: dual-stack as kube-proxy", addrs("192.0.2.10"), "", v4CIDR, fakeProbe{}, all, []v1.IPFamily{v4, v6}},
		{"single-stack ipv6 node", addrs("fd00::10"), "", []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}, fakeProbe{}, all, []v1.IPFamily{v6, v4}},
		{"ipv6 node without ip6tables", addrs("fd00::10"), "", nil, fakeProbe{noIP6Tables: true}, []Mode{ModeNFTables}, []v1.IPFamily{v6, v4}},
		{"dual-stack", addrs("192.0.2.10", "fd00::10"), "", dualCIDRs, fakeProbe{}, all, []v1.IPFamily{v4, v6}},
		{"dual-stack, IPv6 primary", addrs("fd00::10", "192.0.2.10"), "", dualCIDRs, fakeProbe{}, all, []v1.IPFamily{v6, v4}},
		{"dual-stack without any cluster CIDR", addrs("192.0.2.10", "fd00::10"), "", nil, fakeProbe{}, all, []v1.IPFamily{v4, v6}},
		{"bind address names the primary", addrs("192.0.2.10", "fd00::10"), "fd00::10", nil, fakeProbe{}, all, []v1.IPFamily{v6, v4}},
		{"unspecified bind address", addrs("fd00::10"), "0.0.0.0", nil, fakeProbe{}, all, []v1.IPFamily{v6, v4}},
		{"no node IPs: IPv4", nil, "", nil, fakeProbe{}, all, []v1.IPFamily{v4, v6}},
	} {
		for _, mode := range tc.modes {
			o := &Options{Mode: mode, ClusterCIDRs: tc.cidrs}
			if tc.bind != "" {
				o.BindAddress = netip.MustParseAddr(tc.bind)
			}
			if err := decideFamilies(o, tc.nodeIPs, tc.probe); err != nil {
				t.Errorf("%s, %s: %v", tc.name, mode, err)
				continue
			}
			if !slices.Equal(o.Families, tc.want) || o.PrimaryFamily != tc.want[0] {
				t.Errorf("%s, %s: families %v (primary %s), want %v", tc.name, mode, o.Families, o.PrimaryFamily, tc.want)
			}
		}
	}
}

func TestDecideFamiliesUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    Mode
		nodeIPs []netip.Addr
		probe   fakeProbe
		want    string
	}{
		{"ipv6 primary, IPv6 off", ModeNFTables, addrs("fd00::10"), fakeProbe{noKernelV6: true}, `no support for primary IP family "IPv6"`},
		{"ipv6 primary, no ip6tables", ModeIPTables, addrs("fd00::10"), fakeProbe{noIP6Tables: true}, `no support for primary IP family "IPv6"`},
		{"no iptables", ModeIPVS, addrs("192.0.2.10"), fakeProbe{noIPTables: true}, "iptables is not available"},
	} {
		err := decideFamilies(&Options{Mode: tc.mode}, tc.nodeIPs, tc.probe)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	// nftables talks netlink: no iptables is no problem.
	o := &Options{Mode: ModeNFTables}
	if err := decideFamilies(o, addrs("192.0.2.10"), fakeProbe{noIPTables: true}); err != nil || len(o.Families) != 2 {
		t.Errorf("nftables without iptables: %v, %v", err, o.Families)
	}
}

// TestCheckFamilyConfig: kube-proxy's checks; only a wrong-family
// cluster CIDR (single-stack, ClusterCIDR mode) or pod CIDR (NodeCIDR
// mode) stops the daemon.
func TestCheckFamilyConfig(t *testing.T) {
	v6CIDR := []netip.Prefix{netip.MustParsePrefix("fd00:10:244::/56")}
	for _, tc := range []struct {
		name     string
		o        Options
		problems int
		fatal    bool
	}{
		{"ipv4-only, ipv6 cluster CIDR, ClusterCIDR mode", Options{PrimaryFamily: v4, Families: []v1.IPFamily{v4}, ClusterCIDRs: v6CIDR, LocalDetector: proxier.DetectByClusterCIDRs(v6CIDR...)}, 1, true},
		{"dual-stack, ipv6 cluster CIDR only", Options{PrimaryFamily: v4, Families: []v1.IPFamily{v4, v6}, ClusterCIDRs: v6CIDR, LocalDetector: proxier.DetectByClusterCIDRs(v6CIDR...)}, 1, false},
		{"ipv6 pod CIDRs, NodeCIDR mode", Options{PrimaryFamily: v4, Families: []v1.IPFamily{v4, v6}, NodePodCIDRs: v6CIDR, LocalDetector: proxier.DetectByNodeCIDR()}, 1, true},
		{"ipv6-only, ipv4 metrics address", Options{PrimaryFamily: v6, Families: []v1.IPFamily{v6}, MetricsBindAddress: "127.0.0.1:10249", HealthzBindAddress: "0.0.0.0:10256"}, 1, false},
		{"dual-stack, right CIDRs", Options{PrimaryFamily: v6, Families: []v1.IPFamily{v6, v4}, ClusterCIDRs: v6CIDR}, 0, false},
	} {
		problems, fatal := ipFamilyProblems(&tc.o)
		if len(problems) != tc.problems || fatal != tc.fatal {
			t.Errorf("%s: problems %v, fatal %v; want %d, %v", tc.name, problems, fatal, tc.problems, tc.fatal)
		}
		if err := checkFamilyConfig(&tc.o); (err != nil) != tc.fatal {
			t.Errorf("%s: checkFamilyConfig %v", tc.name, err)
		}
	}
}

func TestNodePortFamilyProblems(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name  string
		o     Options
		wants string
	}{
		{"unset", Options{PrimaryFamily: v4}, "nodePortAddresses is unset"},
		{"dual config, primary only", Options{PrimaryFamily: v4, NodePortAddresses: []netip.Prefix{p("192.0.2.0/24")},
			ClusterCIDRs: []netip.Prefix{p("10.244.0.0/16"), p("fd00::/56")}}, "appears to be dual-stack"},
		{"other family only", Options{PrimaryFamily: v6, NodePortAddresses: []netip.Prefix{p("192.0.2.0/24")}}, "appears to be IPv6-primary"},
		{"both families", Options{PrimaryFamily: v4, NodePortAddresses: []netip.Prefix{p("192.0.2.0/24"), p("fd00::/64")}}, ""},
	} {
		got := errors.Join(nodePortFamilyProblems(&tc.o)...)
		if tc.wants == "" && got != nil || tc.wants != "" && (got == nil || !strings.Contains(got.Error(), tc.wants)) {
			t.Errorf("%s: %v, want %q", tc.name, got, tc.wants)
		}
	}
}
