package flowtest

import (
	"fmt"
	"net/netip"
	"strconv"
)

// sixRanges map the fixture's IPv4 ranges to their IPv6 twins: the
// address a.b.c.d of a range becomes the twin prefix followed by the
// range's host octets written as hexadecimal groups (10.244.1.30 ->
// fd00:10:244:1::30), so a case reads the same in both families.
var sixRanges = []struct {
	v4   netip.Prefix
	v6   string // the twin's text up to the host part
	bits int    // the twin's prefix length for the whole range
}{
	{netip.MustParsePrefix("10.244.0.0/16"), "fd00:10:244:%x::%x", 48},  // pods: octet 3 is the node's /64
	{netip.MustParsePrefix("10.96.0.0/16"), "fd00:10:96::%x:%x", 112},   // services
	{netip.MustParsePrefix("192.168.0.0/24"), "2001:db8::%x", 64},       // node IPs
	{netip.MustParsePrefix("203.0.113.0/24"), "2001:db8:ffff::%x", 64},  // outside clients
	{netip.MustParsePrefix("192.0.2.0/24"), "2001:db8:2::%x", 64},       // external IPs
	{netip.MustParsePrefix("198.51.100.0/24"), "2001:db8:5100::%x", 64}, // load-balancer IPs
	{netip.MustParsePrefix("100.64.0.0/16"), "fd64:%x::%x", 32},         // pods outside the cluster CIDR
}

// to6 is an IPv4 fixture address's IPv6 twin; IPv6 addresses are
// returned as they are. An address outside sixRanges is a fixture bug.
func to6(a netip.Addr) netip.Addr {
	if !a.Is4() {
		return a
	}
	b := a.As4()
	for _, r := range sixRanges {
		if !r.v4.Contains(a) {
			continue
		}
		var s string
		if r.v4.Bits() == 16 {
			s = fmt.Sprintf(r.v6, hexOctet(b[2]), hexOctet(b[3]))
		} else {
			s = fmt.Sprintf(r.v6, hexOctet(b[3]))
		}
		return netip.MustParseAddr(s)
	}
	panic(fmt.Sprintf("flowtest: %s has no IPv6 twin", a))
}

// hexOctet writes a decimal octet's digits as a hexadecimal group.
func hexOctet(o byte) uint64 {
	v, _ := strconv.ParseUint(strconv.Itoa(int(o)), 16, 64) // three decimal digits are valid hex
	return v
}

// to6Prefix is a prefix's twin: a whole range maps to its twin range, a
// /24 inside 10.244.0.0/16 to that node's /64, a /32 to a /128.
func to6Prefix(p netip.Prefix) netip.Prefix {
	if !p.Addr().Is4() {
		return p
	}
	addr := to6(p.Addr())
	for _, r := range sixRanges {
		switch {
		case p.Bits() == 32:
			return netip.PrefixFrom(addr, 128)
		case r.v4 == p:
			return netip.PrefixFrom(addr, r.bits).Masked()
		case r.v4.Bits() == 16 && p.Bits() == 24 && r.v4.Contains(p.Addr()):
			return netip.PrefixFrom(addr, 64).Masked()
		}
	}
	panic(fmt.Sprintf("flowtest: %s has no IPv6 twin", p))
}
