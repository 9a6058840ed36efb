package explain

import (
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// LocalAddrs lists the addresses of the calling thread's network
// namespace (what "addrtype LOCAL" and "fib ... type local" match),
// sorted.
func LocalAddrs() ([]netip.Addr, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && !slices.Contains(out, ip.Unmap()) {
			out = append(out, ip.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

// InInterface names the interface this namespace routes src through:
// the one a packet from src comes in on. "" when there is no route.
func InInterface(src netip.Addr) string {
	h, err := netlink.NewHandle()
	if err != nil {
		return ""
	}
	defer h.Close()
	routes, err := h.RouteGet(net.IP(src.AsSlice()))
	if err != nil || len(routes) == 0 {
		return ""
	}
	link, err := h.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return ""
	}
	return link.Attrs().Name
}
