package framework

import (
	"fmt"
	"net/netip"

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

// Ports of the synthetic services and their endpoints.
const (
	CTTCPPort     = 80
	CTTCPEndpoint = 8080
	CTUDPPort     = 53
	CTUDPEndpoint = 5353
)

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

// ctClients: entry i's client is 100.64.0.0 + i/16 (the shared address
// space, /10: 4Mi addresses), port 20000 + i%16.
var ctClientBase = netip.MustParseAddr("100.64.0.0")

const (
	ctPortsPerClient = 16
	ctClientPort     = 20000
	// CTMaxEntries is how many entries the client range numbers.
	CTMaxEntries = ctPortsPerClient << 22
)

// CTEndpointIP is the address of endpoint e of synthetic service s:
// 172.30.s.(e+1).
func CTEndpointIP(s, e int) netip.Addr {
	return netip.AddrFrom4([4]byte{172, 30, byte(s), byte(e + 1)})
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
	client := ctClient(i)
	svc, ep := m.Services[s].IP, m.Services[s].Endpoints[e]
	// Other destinations: 198.18.0.0/15, the benchmarking range.
	other := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
	switch c {
	case CTTCPService:
		orig = ctnetlink.Tuple{Proto: ctnetlink.TCP, Src: client, Dst: netip.AddrPortFrom(svc, CTTCPPort)}
		return orig, ctnetlink.Tuple{Proto: ctnetlink.TCP, Src: netip.AddrPortFrom(ep, CTTCPEndpoint), Dst: client}
	case CTUDPService:
		orig = ctnetlink.Tuple{Proto: ctnetlink.UDP, Src: client, Dst: netip.AddrPortFrom(svc, CTUDPPort)}
		return orig, ctnetlink.Tuple{Proto: ctnetlink.UDP, Src: netip.AddrPortFrom(ep, CTUDPEndpoint), Dst: client}
	case CTTCPOther:
		orig = ctnetlink.Tuple{Proto: ctnetlink.TCP, Src: client, Dst: netip.AddrPortFrom(other, 443)}
	case CTUDPOther:
		orig = ctnetlink.Tuple{Proto: ctnetlink.UDP, Src: client, Dst: netip.AddrPortFrom(other, 123)}
	default:
		orig = ctnetlink.Tuple{Proto: ctnetlink.UDP, Src: client, Dst: netip.AddrPortFrom(ep, CTUDPEndpoint)}
	}
	return orig, ctnetlink.Tuple{Proto: orig.Proto, Src: orig.Dst, Dst: orig.Src}
}

func ctClient(i int) netip.AddrPort {
	a := ctClientBase.As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) + uint32(i/ctPortsPerClient)
	ip := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	return netip.AddrPortFrom(ip, uint16(ctClientPort+i%ctPortsPerClient))
}

// Index finds the mix entry an entry of the table is: -1 for an entry
// that is not one (the harness's real flows, the node's own traffic, or
// an entry whose tuples differ from what the mix made).
func (m *CTMix) Index(orig, reply ctnetlink.Tuple) int {
	src := orig.Src.Addr()
	if !src.Is4() {
		return -1
	}
	a, b := src.As4(), ctClientBase.As4()
	off := int(uint32(a[0])<<24|uint32(a[1])<<16|uint32(a[2])<<8|uint32(a[3])) -
		int(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))
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

// Validate checks that the mix can be laid out.
func (m *CTMix) Validate() error {
	if m.Entries <= 0 || m.Entries > CTMaxEntries {
		return fmt.Errorf("entries %d: want 1..%d", m.Entries, CTMaxEntries)
	}
	if len(m.Services) == 0 || len(m.Services) > 256 {
		return fmt.Errorf("%d services: want 1..256", len(m.Services))
	}
	for i, s := range m.Services {
		if !s.IP.Is4() || len(s.Endpoints) == 0 {
			return fmt.Errorf("service %d: IPv4 address and endpoints needed", i)
		}
	}
	return nil
}
