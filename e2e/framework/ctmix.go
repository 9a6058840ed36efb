package framework

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
)

// CTMix lays out a synthetic conntrack table for the conntrack scale
// harness: entry i (0 <= i < Entries) is a function of i alone, so a
// table of millions is filled, checked and classified without being held
// in memory. Of every 20 entries, 7 are TCP to a service (NATed to one of
// its endpoints), 7 UDP to a service (NATed), 3 TCP and 2 UDP to
// addresses that are no service, and 1 UDP sent straight to an endpoint's
// address (not NATed, its reply source the endpoint's address and port
// like a NATed entry's).
//
// The mix is of one family, its services': every address of an IPv6 mix
// (clients, endpoints, other destinations) is IPv6, laid out like the
// IPv4 mix's.
type CTMix struct {
	Entries  int
	Services []CTService
}

// CTService is one synthetic service: its cluster IP and the addresses
// of its endpoints (none of which exists).
type CTService struct {
	IP        netip.Addr
	Endpoints []netip.Addr
}

// Ports of the synthetic services and their endpoints; the services' UDP
// ports are CTUDPPort's.
const (
	CTTCPPort     = 80
	CTTCPEndpoint = 8080
	CTUDPEndpoint = 5353
	// CTDNSPort is the UDP port of every fourth synthetic service.
	CTDNSPort = 53
	// ctUDPPortBase + s is the UDP port of the other services.
	ctUDPPortBase = 10000
	// Other destinations' ports.
	ctOtherTCPPort = 443
	ctOtherUDPPort = 123
)

// CTUDPPort is synthetic service s's UDP port: CTDNSPort (53) for every
// fourth service (0, 4, 8, ...: a cluster runs a few DNS servers), a port
// of its own (10000 + s) for the others. The spread matters for IPv6: a
// targeted IPv6 cleanup pass asks the kernel for a protocol and port, not
// an address, so it is sent the entries of every service on the port.
// IPv4 passes name the address, and each synthetic service has one UDP
// port, so the spread does not change what they are sent.
func CTUDPPort(s int) uint16 {
	if s%4 == 0 {
		return CTDNSPort
	}
	return uint16(ctUDPPortBase + s)
}

// CTClass is the kind of a mix entry.
type CTClass int

// Classes of mix entries.
const (
	CTTCPService CTClass = iota
	CTUDPService
	CTTCPOther
	CTUDPOther
	CTUDPToEndpoint
)

// Entry i's client is clientBase + i/16 (IPv4: 100.64.0.0/10, the
// shared address space, 4Mi addresses; IPv6: fd00:100:64::/96), port
// 20000 + i%16.
var (
	ctClientBase4 = netip.MustParseAddr("100.64.0.0")
	ctClientBase6 = netip.MustParseAddr("fd00:100:64::")
	// Other destinations: 198.18.0.0/15 and 2001:2::/48, the
	// benchmarking ranges, 65536 addresses of each.
	ctOtherBase4 = netip.MustParseAddr("198.18.0.0")
	ctOtherBase6 = netip.MustParseAddr("2001:2::")
)

const (
	ctPortsPerClient = 16
	ctClientPort     = 20000
	// CTMaxEntries is how many entries the client range numbers.
	CTMaxEntries = ctPortsPerClient << 22
)

// CTEndpointIP is the address of endpoint e of synthetic service s in
// family f: 172.30.s.(e+1), or fd00:172:30:s::(e+1).
func CTEndpointIP(f corev1.IPFamily, s, e int) netip.Addr {
	if f == corev1.IPv6Protocol {
		return addLow32(netip.AddrFrom16([16]byte{0xfd, 0, 0x01, 0x72, 0, 0x30, 0, byte(s)}), uint32(e+1))
	}
	return netip.AddrFrom4([4]byte{172, 30, byte(s), byte(e + 1)})
}

// addLow32 adds n to the last 32 bits of a (of either family).
func addLow32(a netip.Addr, n uint32) netip.Addr {
	b := a.As16()
	binary.BigEndian.PutUint32(b[12:], binary.BigEndian.Uint32(b[12:])+n)
	if a.Is4() {
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return netip.AddrFrom16(b)
}

// is6 tells whether the mix is IPv6 (its services are).
func (m *CTMix) is6() bool { return m.Services[0].IP.Is6() }

// Family is the mix's address family, its services'.
func (m *CTMix) Family() corev1.IPFamily {
	if m.is6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

func (m *CTMix) clientBase() netip.Addr {
	if m.is6() {
		return ctClientBase6
	}
	return ctClientBase4
}

// Where returns entry i's class, service and endpoint (for the classes
// that have them).
func (m *CTMix) Where(i int) (c CTClass, svc, ep int) {
	slot := i % 20
	switch {
	case slot < 7:
		c = CTTCPService
	case slot < 14:
		c = CTUDPService
	case slot < 17:
		c = CTTCPOther
	case slot < 19:
		c = CTUDPOther
	default:
		c = CTUDPToEndpoint
	}
	n := len(m.Services)
	svc = (i / 20) % n
	ep = (i / (20 * n)) % len(m.Services[svc].Endpoints)
	return c, svc, ep
}

// Entry returns entry i's tuples.
func (m *CTMix) Entry(i int) (orig, reply ctnetlink.Tuple) {
	c, s, e := m.Where(i)
	client := m.client(i)
	svc, ep := m.Services[s].IP, m.Services[s].Endpoints[e]
	other := addLow32(ctOtherBase4, uint32(i&0xffff))
	if m.is6() {
		other = addLow32(ctOtherBase6, uint32(i&0xffff))
	}
	switch c {
	case CTTCPService:
		orig = ctnetlink.Tuple{Proto: ctnetlink.TCP, Src: client, Dst: netip.AddrPortFrom(svc, CTTCPPort)}
		return orig, ctnetlink.Tuple{Proto: ctnetlink.TCP, Src: netip.AddrPortFrom(ep, CTTCPEndpoint), Dst: client}
	case CTUDPService:
		orig = ctnetlink.Tuple{Proto: ctnetlink.UDP, Src: client, Dst: netip.AddrPortFrom(svc, CTUDPPort(s))}
		return orig, ctnetlink.Tuple{Proto: ctnetlink.UDP, Src: netip.AddrPortFrom(ep, CTUDPEndpoint), Dst: client}
	case CTTCPOther:
		orig = ctnetlink.Tuple{Proto: ctnetlink.TCP, Src: client, Dst: netip.AddrPortFrom(other, ctOtherTCPPort)}
	case CTUDPOther:
		orig = ctnetlink.Tuple{Proto: ctnetlink.UDP, Src: client, Dst: netip.AddrPortFrom(other, ctOtherUDPPort)}
	default:
		orig = ctnetlink.Tuple{Proto: ctnetlink.UDP, Src: client, Dst: netip.AddrPortFrom(ep, CTUDPEndpoint)}
	}
	return orig, ctnetlink.Tuple{Proto: orig.Proto, Src: orig.Dst, Dst: orig.Src}
}

func (m *CTMix) client(i int) netip.AddrPort {
	return netip.AddrPortFrom(addLow32(m.clientBase(), uint32(i/ctPortsPerClient)), uint16(ctClientPort+i%ctPortsPerClient))
}

// Index finds the mix entry an entry of the table is: -1 for an entry
// that is not one (the harness's real flows, the node's own traffic, an
// entry of the other family, or an entry whose tuples differ from what
// the mix made).
func (m *CTMix) Index(orig, reply ctnetlink.Tuple) int {
	src, base := orig.Src.Addr(), m.clientBase()
	if src.Is4() != base.Is4() {
		return -1
	}
	a, b := src.As16(), base.As16()
	if [12]byte(a[:12]) != [12]byte(b[:12]) {
		return -1
	}
	off := int(binary.BigEndian.Uint32(a[12:])) - int(binary.BigEndian.Uint32(b[12:]))
	port := int(orig.Src.Port()) - ctClientPort
	if off < 0 || port < 0 || port >= ctPortsPerClient {
		return -1
	}
	i := off*ctPortsPerClient + port
	if i >= m.Entries {
		return -1
	}
	if o, r := m.Entry(i); o != orig || r != reply {
		return -1
	}
	return i
}

// Validate checks that the mix can be laid out: services of one family,
// their endpoints of it too.
func (m *CTMix) Validate() error {
	if m.Entries <= 0 || m.Entries > CTMaxEntries {
		return fmt.Errorf("entries %d: want 1..%d", m.Entries, CTMaxEntries)
	}
	if len(m.Services) == 0 || len(m.Services) > 256 {
		return fmt.Errorf("%d services: want 1..256", len(m.Services))
	}
	v6 := m.Services[0].IP.Is6()
	for i, s := range m.Services {
		if !s.IP.IsValid() || s.IP.Is4In6() || s.IP.Is6() != v6 || len(s.Endpoints) == 0 {
			return fmt.Errorf("service %d (%v): an address of the first service's family and endpoints needed", i, s.IP)
		}
		for _, ep := range s.Endpoints {
			if !ep.IsValid() || ep.Is4In6() || ep.Is6() != v6 {
				return fmt.Errorf("service %d: endpoint %v is not of the service's family", i, ep)
			}
		}
	}
	return nil
}
