package ipvs

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"
)

// IPVS service flags (include/uapi/linux/ip_vs.h).
const (
	flagPersistent uint32 = 0x0001
	flagHashed     uint32 = 0x0002 // set by the kernel, never by us
)

// vsKey identifies a virtual server: protocol, address and port, or a
// firewall mark (with the family it serves).
type vsKey struct {
	Family v1.IPFamily
	Proto  v1.Protocol // "" for a fwmark service
	Addr   netip.Addr
	Port   uint16
	Mark   uint32
}

// String is "TCP/10.96.0.10:80" or "FWM/0x10000/IPv4"; metrics use it
// as the virtual_server label.
func (k vsKey) String() string {
	if k.Mark != 0 {
		return fmt.Sprintf("FWM/%#x/%s", k.Mark, k.Family)
	}
	return string(k.Proto) + "/" + netip.AddrPortFrom(k.Addr, k.Port).String()
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// virtualServer is one desired IPVS service with its real servers.
type virtualServer struct {
	Key       vsKey
	Scheduler string
	// Timeout > 0 makes the service persistent (sessionAffinity
	// ClientIP) for that many seconds.
	Timeout uint32
	// Dests are the real servers, sorted, all with weight 1.
	Dests []netip.AddrPort
}

func (v *virtualServer) equal(o *virtualServer) bool {
	return v.Key == o.Key && v.Scheduler == o.Scheduler && v.Timeout == o.Timeout && slices.Equal(v.Dests, o.Dests)
}

func addressFamily(f v1.IPFamily) uint16 {
	if f == v1.IPv6Protocol {
		return syscall.AF_INET6
	}
	return syscall.AF_INET
}

func protoNumber(p v1.Protocol) uint16 {
	switch p {
	case v1.ProtocolUDP:
		return syscall.IPPROTO_UDP
	case v1.ProtocolSCTP:
		return syscall.IPPROTO_SCTP
	}
	return syscall.IPPROTO_TCP
}

func protoName(n uint16) (v1.Protocol, bool) {
	switch n {
	case syscall.IPPROTO_TCP:
		return v1.ProtocolTCP, true
	case syscall.IPPROTO_UDP:
		return v1.ProtocolUDP, true
	case syscall.IPPROTO_SCTP:
		return v1.ProtocolSCTP, true
	}
	return "", false
}

// netmask is the persistence granularity: one client address (IPv4: a
// mask, IPv6: a prefix length), as kube-proxy sets it.
func netmask(f v1.IPFamily) uint32 {
	if f == v1.IPv6Protocol {
		return 128
	}
	return 0xffffffff
}

// handle is the ipvs.Service that names the key in requests.
func (k vsKey) handle() *ipvs.Service {
	s := &ipvs.Service{AddressFamily: addressFamily(k.Family)}
	if k.Mark != 0 {
		s.FWMark = k.Mark
		return s
	}
	s.Address, s.Protocol, s.Port = k.Addr.AsSlice(), protoNumber(k.Proto), k.Port
	return s
}

// service is the full ipvs.Service for NewService / UpdateService.
func (v *virtualServer) service() *ipvs.Service {
	s := v.Key.handle()
	s.SchedName = v.Scheduler
	s.Netmask = netmask(v.Key.Family)
	if v.Timeout > 0 {
		s.Flags, s.Timeout = flagPersistent, v.Timeout
	}
	return s
}

// serviceMatches reports whether the kernel's service has the desired
// scheduler and persistence.
func (v *virtualServer) serviceMatches(s *ipvs.Service) bool {
	persistent := s.Flags&flagPersistent != 0
	if s.SchedName != v.Scheduler || persistent != (v.Timeout > 0) {
		return false
	}
	return !persistent || (s.Timeout == v.Timeout && s.Netmask == netmask(v.Key.Family))
}

// keyOf reads a kernel service's key; false for one the backend could
// not have made (unknown family or protocol).
func keyOf(s *ipvs.Service) (vsKey, bool) {
	var k vsKey
	switch s.AddressFamily {
	case syscall.AF_INET:
		k.Family = v1.IPv4Protocol
	case syscall.AF_INET6:
		k.Family = v1.IPv6Protocol
	default:
		return k, false
	}
	if s.FWMark != 0 {
		k.Mark = s.FWMark
		return k, true
	}
	addr, ok := netip.AddrFromSlice(s.Address)
	if !ok {
		return k, false
	}
	k.Addr, k.Port = addr.Unmap(), s.Port
	k.Proto, ok = protoName(s.Protocol)
	return k, ok
}

// ServiceKey reads a kernel virtual service as this mode keys it: its
// family, protocol and address (or, for a fwmark service, its mark and an
// empty protocol); false for one the mode could not have made. Readers of
// the live IPVS table (switchyard explain) share it.
func ServiceKey(s *ipvs.Service) (fam v1.IPFamily, proto v1.Protocol, addr netip.AddrPort, mark uint32, ok bool) {
	k, ok := keyOf(s)
	return k.Family, k.Proto, netip.AddrPortFrom(k.Addr, k.Port), k.Mark, ok
}

// destination is a desired real server: masquerading (NAT), weight 1.
func destination(ap netip.AddrPort, weight int) *ipvs.Destination {
	fam := uint16(syscall.AF_INET)
	if ap.Addr().Is6() {
		fam = syscall.AF_INET6
	}
	return &ipvs.Destination{Address: ap.Addr().AsSlice(), Port: ap.Port(), Weight: weight,
		ConnectionFlags: ipvs.ConnectionFlagMasq, AddressFamily: fam}
}

func destKey(d *ipvs.Destination) (netip.AddrPort, bool) {
	a, ok := netip.AddrFromSlice(d.Address)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), d.Port), true
}

// addrOf converts a net.IP (nil: invalid).
func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// sortedKeys orders keys by their string form (formatted once each).
func sortedKeys(keys map[vsKey]struct{}) []vsKey {
	type named struct {
		k vsKey
		s string
	}
	list := make([]named, 0, len(keys))
	for k := range keys {
		list = append(list, named{k, k.String()})
	}
	slices.SortFunc(list, func(a, b named) int { return cmpString(a.s, b.s) })
	out := make([]vsKey, len(list))
	for i, n := range list {
		out[i] = n.k
	}
	return out
}
