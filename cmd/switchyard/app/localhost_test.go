package app

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

var cmpPrefixes = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// TestNodePortAddressKeywords: the keywords expand as kube-proxy v1.37
// expands them, combine with CIDRs, and nftables mode's default is
// "primary" plus 127.0.0.1/32 (KEP-6032).
func TestNodePortAddressKeywords(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     []netip.Prefix
		primary  bool
		defaults bool
	}{
		{[]string{"--proxy-mode=nftables"}, prefixes("127.0.0.1/32"), true, true},
		{[]string{"--proxy-mode=iptables"}, nil, false, false},
		{[]string{"--proxy-mode=nftables", "--nodeport-addresses=primary"}, nil, true, false},
		{[]string{"--nodeport-addresses=primary,localhost,10.0.0.0/8"}, prefixes("127.0.0.0/8", "::1/128", "10.0.0.0/8"), true, false},
		{[]string{"--nodeport-addresses=all"}, prefixes("0.0.0.0/0", "::/0"), false, false},
	} {
		res := execute(t, tc.args...)
		if res.err != nil {
			t.Fatalf("%v: %v", tc.args, res.err)
		}
		o := res.opts
		if d := cmp.Diff(tc.want, o.NodePortAddresses, cmpPrefixes); d != "" || o.NodePortPrimary != tc.primary || o.NodePortDefaulted != tc.defaults {
			t.Errorf("%v: primary %v defaulted %v, prefixes (-want +got):\n%s", tc.args, o.NodePortPrimary, o.NodePortDefaulted, d)
		}
	}
}

func TestResolveNodePortAddressesCombined(t *testing.T) {
	o := &Options{NodePortPrimary: true, NodePortAddresses: prefixes("127.0.0.0/8", "::1/128")}
	if err := resolveNodePortAddresses(o, addrs("192.0.2.10")); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(prefixes("127.0.0.0/8", "::1/128", "192.0.2.10/32"), o.NodePortAddresses, cmpPrefixes); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// "primary,localhost" without a node IP: loopback alone is no
	// restriction the operator can have meant.
	o = &Options{NodePortPrimary: true, NodePortAddresses: prefixes("127.0.0.0/8")}
	if err := resolveNodePortAddresses(o, nil); err == nil {
		t.Error("primary,localhost without node IPs: want an error")
	}
	// "primary,10.0.0.0/8" without a node IP: the CIDR stands.
	o = &Options{NodePortPrimary: true, NodePortAddresses: prefixes("10.0.0.0/8")}
	if err := resolveNodePortAddresses(o, nil); err != nil || len(o.NodePortAddresses) != 1 {
		t.Errorf("primary,10.0.0.0/8 without node IPs: %v, %v", err, o.NodePortAddresses)
	}
	// nftables' default without a node IP: every address, as kube-proxy.
	o = &Options{NodePortPrimary: true, NodePortDefaulted: true, NodePortAddresses: prefixes("127.0.0.1/32")}
	if err := resolveNodePortAddresses(o, nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(prefixes("127.0.0.1/32", "0.0.0.0/0", "::/0"), o.NodePortAddresses, cmpPrefixes); d != "" {
		t.Errorf("defaulted, no node IPs (-want +got):\n%s", d)
	}
}

func TestLocalhostNodePortFamilies(t *testing.T) {
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	dual := []v1.IPFamily{v4, v6}
	for _, tc := range []struct {
		name string
		o    Options
		want []v1.IPFamily
	}{
		{"nftables default", Options{Mode: ModeNFTables, Families: dual, NodePortAddresses: prefixes("127.0.0.1/32", "192.0.2.10/32")}, []v1.IPFamily{v4}},
		{"nftables localhost", Options{Mode: ModeNFTables, Families: dual, NodePortAddresses: prefixes("127.0.0.0/8", "::1/128")}, dual},
		{"nftables all", Options{Mode: ModeNFTables, Families: dual, NodePortAddresses: prefixes("0.0.0.0/0", "::/0")}, nil},
		{"nftables unset", Options{Mode: ModeNFTables, Families: dual}, nil},
		{"nftables ipv6 node", Options{Mode: ModeNFTables, Families: []v1.IPFamily{v6}, NodePortAddresses: prefixes("127.0.0.0/8", "::1/128")}, []v1.IPFamily{v6}},
		{"gate off", Options{Mode: ModeNFTables, Families: dual, LocalhostRelayOff: true, NodePortAddresses: prefixes("127.0.0.0/8")}, nil},
		{"iptables: IPv6 only (IPv4 has route_localnet)", Options{Mode: ModeIPTables, Families: dual, NodePortAddresses: prefixes("127.0.0.0/8", "::1/128")}, []v1.IPFamily{v6}},
		{"ipvs", Options{Mode: ModeIPVS, Families: dual, NodePortAddresses: prefixes("127.0.0.0/8", "::1/128")}, nil},
		{"userspace", Options{Mode: ModeUserspace, Families: dual, NodePortAddresses: prefixes("127.0.0.0/8", "::1/128")}, nil},
	} {
		if got := localhostNodePortFamilies(&tc.o); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
