package userspace

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// NodePort reservation. The rules send NodePort traffic to the proxy
// sockets, but nothing stops a local process from binding the NodePort
// itself: it would then serve the node's own connections the rules do
// not catch, and confuse operators. Upstream kube-proxy held every
// NodePort with an open socket ("port holders") for this reason, logging
// and skipping ports already taken; so does this backend.
//
// A holder is a TCP or UDP socket bound, without SO_REUSEADDR and without
// listen(), to the NodePort on each address NodePorts are served on: the
// wildcard address of the family, or, with --nodeport-addresses, each
// local address inside the prefixes. Any other bind of that port there
// then fails with EADDRINUSE (Linux's bind conflict check), and as it
// never listens it accepts nothing: a TCP SYN that escapes the rules is
// answered with a reset, not queued. SCTP is not proxied, so its NodePorts
// are not held.

// PortReserver opens NodePort holders and lists the addresses they go on.
// HostPortReserver and NetnsSockets implement it.
type PortReserver interface {
	// Reserve binds a socket of proto (TCP or UDP) to addr and keeps it
	// bound until closed. A port already bound there fails with an error
	// wrapping syscall.EADDRINUSE.
	Reserve(proto v1.Protocol, addr netip.AddrPort) (io.Closer, error)
	// LocalAddrs lists the addresses of the namespace's interfaces.
	LocalAddrs() ([]netip.Addr, error)
}

// HostPortReserver reserves ports in the calling process's namespace.
type HostPortReserver struct{}

var _ PortReserver = HostPortReserver{}

// Reserve implements PortReserver.
func (HostPortReserver) Reserve(proto v1.Protocol, addr netip.AddrPort) (io.Closer, error) {
	addr = unmapAddrPort(addr)
	domain, typ := unix.AF_INET, unix.SOCK_STREAM
	if addr.Addr().Is6() {
		domain = unix.AF_INET6
	}
	if proto == v1.ProtocolUDP {
		typ = unix.SOCK_DGRAM
	} else if proto != v1.ProtocolTCP {
		return nil, fmt.Errorf("reserve %s %s: protocol not supported", proto, addr)
	}
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reserve %s %s: %w", proto, addr, err)
	}
	if err := bindHolder(fd, addr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("reserve %s %s: %w", proto, addr, err)
	}
	return os.NewFile(uintptr(fd), "nodeport-holder "+addr.String()), nil
}

// bindHolder binds fd to addr; an IPv6 holder covers IPv6 only (the IPv4
// one is the IPv4 family's business).
func bindHolder(fd int, addr netip.AddrPort) error {
	if addr.Addr().Is4() {
		return unix.Bind(fd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()})
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
		return err
	}
	sa := &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	if z := addr.Addr().Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		}
	}
	return unix.Bind(fd, sa)
}

// LocalAddrs implements PortReserver.
func (HostPortReserver) LocalAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list local addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// holdKey is one NodePort holder.
type holdKey struct {
	proto v1.Protocol
	addr  netip.AddrPort
}

// nodePortHolds are the open holders and the ones that failed.
type nodePortHolds struct {
	open    map[holdKey]io.Closer
	failing map[holdKey]struct{} // logged once; retried every sync
}

// nodePortAddrs returns where one family's NodePorts are held: the
// family's wildcard address without --nodeport-addresses prefixes of the
// family, else the local addresses inside them (sorted).
func nodePortAddrs(prefixes []netip.Prefix, fam v1.IPFamily, local []netip.Addr) []netip.Addr {
	if len(prefixes) == 0 {
		if fam == v1.IPv6Protocol {
			return []netip.Addr{netip.IPv6Unspecified()}
		}
		return []netip.Addr{netip.IPv4Unspecified()}
	}
	var out []netip.Addr
	for _, a := range local {
		a = a.Unmap()
		if familyOf(a) == fam && slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// wantedHolds lists the holders the plans need on addrs (nodePortAddrs).
func wantedHolds(families []v1.IPFamily, plans map[v1.IPFamily][]servicePlan, addrs map[v1.IPFamily][]netip.Addr) map[holdKey]struct{} {
	want := map[holdKey]struct{}{}
	for _, fam := range families {
		for _, p := range plans[fam] {
			if p.sp.NodePort == 0 {
				continue
			}
			for _, a := range addrs[fam] {
				want[holdKey{proto: p.sp.Protocol, addr: netip.AddrPortFrom(a, p.sp.NodePort)}] = struct{}{}
			}
		}
	}
	return want
}

// nodePortAddrs are, per family, the addresses NodePorts are held and
// sentinels bound on: the wildcard, or with --nodeport-addresses the
// local addresses inside that family's prefixes (read through
// PortReserver, once per sync; without one, the wildcard).
func nodePortAddrsOf(cfg *Config) (map[v1.IPFamily][]netip.Addr, error) {
	out := map[v1.IPFamily][]netip.Addr{}
	var local []netip.Addr
	for _, fam := range cfg.Families {
		prefixes := proxier.PrefixesOfFamily(cfg.NodePortAddresses, fam)
		if cfg.PortReserver == nil {
			prefixes = nil
		}
		if len(prefixes) > 0 && local == nil {
			var err error
			if local, err = cfg.PortReserver.LocalAddrs(); err != nil {
				return nil, err
			}
		}
		out[fam] = nodePortAddrs(prefixes, fam, local)
	}
	return out, nil
}

// reserve opens the missing holders of want (wantedHolds) and closes
// the unneeded ones; a port a sentinel holds (sentinel) needs none. A
// port another socket holds is logged when first found taken, retried by
// every sync, and counted in switchyard_userspace_nodeports_unreserved
// (gauge); it never fails the sync (NodePort traffic is still
// redirected).
func (h *nodePortHolds) reserve(r PortReserver, want map[holdKey]struct{}, sentinel func(sentinelKey) bool, gauge *prometheus.GaugeVec) {
	for k := range want {
		if sentinelHolds(k, sentinel) {
			delete(want, k)
		}
	}
	h.drop(func(k holdKey) bool { _, ok := want[k]; return !ok })
	failing := map[holdKey]struct{}{}
	for k := range want {
		if _, ok := h.open[k]; ok {
			continue
		}
		c, err := r.Reserve(k.proto, k.addr)
		if err == nil {
			h.open[k] = c
			if _, was := h.failing[k]; was {
				klog.InfoS("NodePort reserved after all", "protocol", k.proto, "address", k.addr)
			}
			continue
		}
		failing[k] = struct{}{}
		if _, was := h.failing[k]; !was {
			klog.ErrorS(err, "Cannot reserve NodePort; another socket holds it, NodePort traffic is still proxied",
				"protocol", k.proto, "address", k.addr, "inUse", errors.Is(err, syscall.EADDRINUSE))
		}
	}
	h.failing = failing
	h.count(gauge)
}

// count sets the gauge of unreserved NodePorts per protocol.
func (h *nodePortHolds) count(gauge *prometheus.GaugeVec) {
	counts := map[v1.Protocol]int{}
	for k := range h.failing {
		counts[k.proto]++
	}
	for _, p := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP} {
		gauge.WithLabelValues(string(p)).Set(float64(counts[p]))
	}
}

// release closes every holder (Close).
func (h *nodePortHolds) release() {
	for k, c := range h.open {
		c.Close()
		delete(h.open, k)
	}
	clear(h.failing)
}

// drop closes the holders drop selects. Sync releases the holders of
// NodePorts whose sentinels are about to open before opening them, and
// reserves the others once the sentinels are in place.
func (h *nodePortHolds) drop(drop func(holdKey) bool) {
	for k, c := range h.open {
		if drop(k) {
			c.Close()
			delete(h.open, k)
		}
	}
}

// nodePortScopes is what NodePort rules are rendered for: one rule set
// per --nodeport-addresses prefix (each also matching addrtype LOCAL, so
// address changes need no resync, as in iptables mode), or one
// unrestricted (invalid prefix) without prefixes.
func nodePortScopes(prefixes []netip.Prefix) []netip.Prefix {
	if len(prefixes) == 0 {
		return []netip.Prefix{{}}
	}
	return prefixes
}

// sentinelHolds reports whether a NodePort sentinel (see sentinel.go) on
// k's address or its family's wildcard holds k's port: no holder is
// needed then, and none could bind beside it.
func sentinelHolds(k holdKey, has func(sentinelKey) bool) bool {
	fam, any := v1.IPv4Protocol, netip.IPv4Unspecified()
	if k.addr.Addr().Unmap().Is6() {
		fam, any = v1.IPv6Protocol, netip.IPv6Unspecified()
	}
	return has(sentinelKey{family: fam, proto: k.proto, addr: k.addr}) ||
		has(sentinelKey{family: fam, proto: k.proto, addr: netip.AddrPortFrom(any, k.addr.Port())})
}
