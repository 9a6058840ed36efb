package ctnetlink

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// Conntrack netlink message types and attributes (linux/netfilter/
// nfnetlink_conntrack.h) that golang.org/x/sys/unix lacks.
const (
	subsysCtnetlink = 1

	MsgNew    = 0 // IPCTNL_MSG_CT_NEW
	MsgGet    = 1 // IPCTNL_MSG_CT_GET
	MsgDelete = 2 // IPCTNL_MSG_CT_DELETE

	ctaTupleOrig  = 1
	ctaTupleReply = 2
	ctaStatus     = 3
	ctaProtoinfo  = 4
	ctaTimeout    = 7
	ctaFilter     = 25

	ctaTupleIP    = 1
	ctaTupleProto = 2

	ctaIPv4Src = 1
	ctaIPv4Dst = 2
	ctaIPv6Src = 3
	ctaIPv6Dst = 4

	ctaProtoNum     = 1
	ctaProtoSrcPort = 2
	ctaProtoDstPort = 3

	ctaProtoinfoTCP      = 1
	ctaProtoinfoTCPState = 1

	ctaFilterOrigFlags  = 1
	ctaFilterReplyFlags = 2

	// CTA_FILTER_F_* bits: which fields of a tuple the filter compares.
	filterIPSrc   = 1 << 0
	filterIPDst   = 1 << 1
	filterProto   = 1 << 3
	filterSrcPort = 1 << 4
	filterDstPort = 1 << 5

	// IPS_SEEN_REPLY | IPS_ASSURED | IPS_CONFIRMED: the kernel confirms
	// an entry before applying CTA_STATUS and refuses (EBUSY) a status
	// that would clear the bit.
	statusAssured = 1<<1 | 1<<2 | 1<<3
	// TCP_CONNTRACK_ESTABLISHED.
	tcpEstablished = 3

	nfgenLen = 4
)

// Protocol numbers as conntrack reports them.
const (
	TCP  uint8 = unix.IPPROTO_TCP
	UDP  uint8 = unix.IPPROTO_UDP
	SCTP uint8 = unix.IPPROTO_SCTP
)

// Tuple is one direction of an entry: protocol, source and destination.
type Tuple struct {
	Proto    uint8
	Src, Dst netip.AddrPort
}

// Family is the tuple's address family (AF_INET or AF_INET6).
func (t Tuple) Family() uint8 { return familyOf(t.Src.Addr()) }

func familyOf(a netip.Addr) uint8 {
	if a.Is4() || a.Is4In6() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// Filter narrows a dump in the kernel. Zero fields compare nothing; a
// port is compared only with its address's field set, and nothing but
// Proto is compared unless Proto is set (the kernel needs the protocol
// to read ports).
//
// In an IPv6 dump only the protocol and the ports reach the kernel, never
// the addresses: ctnetlink's filter compares IPv6 addresses inverted
// (ctnetlink_filter_match_tuple tests `!ipv6_addr_cmp(...)`, true when the
// addresses are equal, and then skips the entry), so a filter naming an
// IPv6 address sends every entry but that address's. This is so from the
// filter's introduction (Linux 5.8) through 6.18 at least. The ports
// still narrow the dump; the caller decides each entry it is sent, as it
// must anyway.
type Filter struct {
	Proto uint8
	// OrigDst: the original tuple's destination (a service address).
	OrigDst netip.AddrPort
	// ReplySrc: the reply tuple's source (where the flow was DNATed to).
	ReplySrc netip.AddrPort
}

// IsZero reports a filter that compares nothing.
func (f Filter) IsZero() bool { return f == Filter{} }

// appendFilter lays out CTA_FILTER and the tuples it compares.
func appendFilter(b []byte, family uint8, f Filter) []byte {
	if f.Proto == 0 {
		return b
	}
	origFlags, orig := tupleFilter(family, f.Proto, netip.AddrPort{}, f.OrigDst)
	replyFlags, reply := tupleFilter(family, f.Proto, f.ReplySrc, netip.AddrPort{})
	at := nfnetlink.BeginNested(&b, ctaFilter)
	b = appendHostUint32(b, ctaFilterOrigFlags, origFlags)
	if f.ReplySrc.IsValid() {
		b = appendHostUint32(b, ctaFilterReplyFlags, replyFlags)
	}
	nfnetlink.EndNested(b, at)
	b = appendTuple(b, ctaTupleOrig, orig)
	if f.ReplySrc.IsValid() {
		b = appendTuple(b, ctaTupleReply, reply)
	}
	return b
}

// tupleFilter is the flags and values of one direction of a filter.
func tupleFilter(family, proto uint8, src, dst netip.AddrPort) (uint32, Tuple) {
	flags := uint32(filterProto)
	zero := netip.IPv4Unspecified()
	if family == unix.AF_INET6 {
		zero = netip.IPv6Unspecified()
	}
	t := Tuple{Proto: proto, Src: netip.AddrPortFrom(zero, 0), Dst: netip.AddrPortFrom(zero, 0)}
	v4 := family != unix.AF_INET6 // IPv6 addresses: see Filter
	if src.IsValid() {
		t.Src = src
		flags |= pick(v4, filterIPSrc) | pick(src.Port() != 0, filterSrcPort)
	}
	if dst.IsValid() {
		t.Dst = dst
		flags |= pick(v4, filterIPDst) | pick(dst.Port() != 0, filterDstPort)
	}
	return flags, t
}

func pick(ok bool, flag uint32) uint32 {
	if ok {
		return flag
	}
	return 0
}

func appendHostUint32(b []byte, typ uint16, v uint32) []byte {
	var p [4]byte
	binary.NativeEndian.PutUint32(p[:], v)
	return nfnetlink.AppendAttr(b, typ, p[:])
}

// appendTuple lays out a tuple attribute (CTA_TUPLE_ORIG or _REPLY).
func appendTuple(b []byte, typ uint16, t Tuple) []byte {
	at := nfnetlink.BeginNested(&b, typ)
	ip := nfnetlink.BeginNested(&b, ctaTupleIP)
	src, dst := t.Src.Addr().Unmap(), t.Dst.Addr().Unmap()
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		b = nfnetlink.AppendAttr(b, ctaIPv4Src, s[:])
		b = nfnetlink.AppendAttr(b, ctaIPv4Dst, d[:])
	} else {
		s, d := src.As16(), dst.As16()
		b = nfnetlink.AppendAttr(b, ctaIPv6Src, s[:])
		b = nfnetlink.AppendAttr(b, ctaIPv6Dst, d[:])
	}
	nfnetlink.EndNested(b, ip)
	proto := nfnetlink.BeginNested(&b, ctaTupleProto)
	b = nfnetlink.AppendAttr(b, ctaProtoNum, []byte{t.Proto})
	b = nfnetlink.AppendAttr(b, ctaProtoSrcPort, be16(t.Src.Port()))
	b = nfnetlink.AppendAttr(b, ctaProtoDstPort, be16(t.Dst.Port()))
	nfnetlink.EndNested(b, proto)
	nfnetlink.EndNested(b, at)
	return b
}

func be16(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }

// AppendNew lays out the attributes of an IPCTNL_MSG_CT_NEW request for
// an entry with these tuples, confirmed and assured (TCP entries
// ESTABLISHED), expiring in timeout seconds.
func AppendNew(b []byte, orig, reply Tuple, timeout uint32) []byte {
	b = appendTuple(b, ctaTupleOrig, orig)
	b = appendTuple(b, ctaTupleReply, reply)
	b = nfnetlink.AppendUint32(b, ctaStatus, statusAssured)
	b = nfnetlink.AppendUint32(b, ctaTimeout, timeout)
	if orig.Proto == TCP {
		pi := nfnetlink.BeginNested(&b, ctaProtoinfo)
		tcp := nfnetlink.BeginNested(&b, ctaProtoinfoTCP)
		b = nfnetlink.AppendAttr(b, ctaProtoinfoTCPState, []byte{tcpEstablished})
		nfnetlink.EndNested(b, tcp)
		nfnetlink.EndNested(b, pi)
	}
	return b
}

// ErrShort reports a message too short for its headers.
var ErrShort = errors.New("conntrack message too short")

// ParseTuples reads the original and reply tuples of an entry's
// attributes (a dumped message after its nfgenmsg). Nothing is
// allocated.
func ParseTuples(attrs []byte) (orig, reply Tuple, err error) {
	seen := 0
	err = nfnetlink.Walk(attrs, func(typ uint16, v []byte) {
		switch typ {
		case ctaTupleOrig:
			orig, seen = parseTuple(v), seen+1
		case ctaTupleReply:
			reply, seen = parseTuple(v), seen+1
		}
	})
	if err == nil && seen != 2 {
		err = errors.New("conntrack entry without both tuples")
	}
	return orig, reply, err
}

func parseTuple(b []byte) Tuple {
	var t Tuple
	var src, dst netip.Addr
	var sport, dport uint16
	_ = nfnetlink.Walk(b, func(typ uint16, v []byte) {
		switch typ {
		case ctaTupleIP:
			_ = nfnetlink.Walk(v, func(typ uint16, v []byte) {
				a, ok := netip.AddrFromSlice(v)
				if !ok {
					return
				}
				switch typ {
				case ctaIPv4Src, ctaIPv6Src:
					src = a
				case ctaIPv4Dst, ctaIPv6Dst:
					dst = a
				}
			})
		case ctaTupleProto:
			_ = nfnetlink.Walk(v, func(typ uint16, v []byte) {
				switch {
				case typ == ctaProtoNum && len(v) >= 1:
					t.Proto = v[0]
				case typ == ctaProtoSrcPort && len(v) >= 2:
					sport = binary.BigEndian.Uint16(v)
				case typ == ctaProtoDstPort && len(v) >= 2:
					dport = binary.BigEndian.Uint16(v)
				}
			})
		}
	})
	t.Src, t.Dst = netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport)
	return t
}

// Matches tells whether the kernel would send an entry with these tuples
// through the filter (for fakes and checks; the kernel decides itself):
// for an IPv6 entry the ports are compared and the addresses are not (see
// Filter).
func (f Filter) Matches(orig, reply Tuple) bool {
	v4 := orig.Dst.Addr().Unmap().Is4()
	same := func(want, got netip.AddrPort) bool {
		if !want.IsValid() {
			return true
		}
		return (!v4 || want.Addr().Unmap() == got.Addr().Unmap()) && (want.Port() == 0 || want.Port() == got.Port())
	}
	if f.Proto == 0 {
		return true
	}
	return orig.Proto == f.Proto && same(f.OrigDst, orig.Dst) && same(f.ReplySrc, reply.Src)
}
