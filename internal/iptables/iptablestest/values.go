package iptablestest

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// parseMark parses "value[/mask]" (mask defaults to all ones).
func parseMark(s string) (value, mask uint32, err error) {
	v, m, hasMask := strings.Cut(s, "/")
	value64, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("bad mark %q", s)
	}
	mask64 := uint64(0xffffffff)
	if hasMask {
		if mask64, err = strconv.ParseUint(m, 0, 32); err != nil {
			return 0, 0, fmt.Errorf("bad mark mask %q", s)
		}
	}
	return uint32(value64), uint32(mask64), nil
}

// portRange is an inclusive range of ports.
type portRange struct{ lo, hi uint16 }

// parsePortSet parses "80", "1000:2000" or a multiport list "80,443,1000:2000".
func parsePortSet(s string) ([]portRange, error) {
	var out []portRange
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, ":")
		l, err := parsePort(lo, 0)
		if err != nil {
			return nil, err
		}
		h := l
		if isRange {
			if h, err = parsePort(hi, 65535); err != nil {
				return nil, err
			}
		}
		if h < l {
			return nil, fmt.Errorf("inverted port range %q", part)
		}
		out = append(out, portRange{l, h})
	}
	return out, nil
}

func parsePort(s string, empty uint16) (uint16, error) {
	if s == "" {
		return empty, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return uint16(n), nil
}

func portIn(set []portRange, p uint16) bool {
	for _, r := range set {
		if p >= r.lo && p <= r.hi {
			return true
		}
	}
	return false
}

// parseNATDest parses a DNAT --to-destination: "ip", "ip:port", "[ip6]",
// "[ip6]:port" or a bare IPv6 address. Ranges are not modelled.
func parseNATDest(s string) (netip.AddrPort, bool, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, true, nil
	}
	host := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a, 0), false, nil
	}
	if isRange(s) {
		return netip.AddrPort{}, false, fmt.Errorf("NAT ranges (%q) are not modelled", s)
	}
	return netip.AddrPort{}, false, fmt.Errorf("bad NAT destination %q", s)
}
