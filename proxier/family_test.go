package proxier

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestPrefixesOfFamily(t *testing.T) {
	p := netip.MustParsePrefix
	tests := []struct {
		name   string
		in     []netip.Prefix
		family v1.IPFamily
		want   []netip.Prefix
	}{
		{"keeps the family, masked", []netip.Prefix{p("10.1.2.3/8"), p("2001:db8::1/64")}, v1.IPv4Protocol, []netip.Prefix{p("10.0.0.0/8")}},
		{"v6", []netip.Prefix{p("10.0.0.0/8"), p("2001:db8::1/64")}, v1.IPv6Protocol, []netip.Prefix{p("2001:db8::/64")}},
		{"zero length means all", []netip.Prefix{p("10.0.0.0/8"), p("0.0.0.0/0")}, v1.IPv4Protocol, nil},
		{"other family's zero length does not", []netip.Prefix{p("10.0.0.0/8"), p("::/0")}, v1.IPv4Protocol, []netip.Prefix{p("10.0.0.0/8")}},
		{"invalid skipped", []netip.Prefix{{}}, v1.IPv4Protocol, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PrefixesOfFamily(tc.in, tc.family)
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
