package proxier

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// FamilyOfPrefix returns the IP family of a prefix.
func FamilyOfPrefix(p netip.Prefix) v1.IPFamily { return FamilyOf(p.Addr()) }

// PrefixesOfFamily keeps the valid prefixes of one family, masked. A
// zero-length prefix (0.0.0.0/0, ::/0) means "everything", which callers
// treat like no restriction at all: the result is then nil. Used for
// --nodeport-addresses and loadBalancerSourceRanges, as kube-proxy does.
func PrefixesOfFamily(all []netip.Prefix, family v1.IPFamily) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range all {
		if !p.IsValid() || FamilyOfPrefix(p) != family {
			continue
		}
		if p.Bits() == 0 {
			return nil
		}
		out = append(out, p.Masked())
	}
	return out
}

// AddrsOfFamily keeps the valid addresses of one family, IPv4-mapped
// IPv6 addresses unmapped (external and load-balancer IPs).
func AddrsOfFamily(addrs []netip.Addr, family v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if a.IsValid() && FamilyOf(a) == family {
			out = append(out, a.Unmap())
		}
	}
	return out
}
