package conntrack

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
)

// The table's own dump (internal/ctnetlink). netlink v1.3.1's
// ConntrackDeleteFilters and ConntrackTableList parse the ports of TCP and
// UDP tuples only, so SCTP entries reached filters without ports and could
// be matched by address only; they also read the whole dump into memory
// before the first entry is looked at (a table of 1M entries made the
// daemon's RSS grow by ~370 MB during a pass). Here the dump is streamed
// through one reused buffer and parsed without allocating, both tuples
// with ports for any protocol whose tuple carries them (TCP, UDP,
// UDP-Lite, SCTP, DCCP); the kernel may narrow it (a Scope). Deletion
// sends the kernel the entry's own attributes (tuples and id), many to a
// sendmsg on a second socket while the dump goes on, so an entry
// recreated meanwhile is not hit.
//
// Flows handed to filters carry FamilyType, Forward and Reverse only
// (no mark, zone, timeouts or labels): every filter of this program
// decides on those. A filter gets the same ConntrackFlow for every entry
// of a dump and must not keep it.

// flowReader fills one reused ConntrackFlow from dumped attributes.
type flowReader struct {
	f netlink.ConntrackFlow
}

// read parses attrs into the reader's flow; false for an entry without
// both tuples.
func (r *flowReader) read(family uint8, attrs []byte) bool {
	orig, reply, err := ctnetlink.ParseTuples(attrs)
	if err != nil {
		return false
	}
	r.f.FamilyType = family
	setTuple(&r.f.Forward, orig)
	setTuple(&r.f.Reverse, reply)
	return true
}

func setTuple(t *netlink.IPTuple, c ctnetlink.Tuple) {
	t.Protocol = c.Proto
	t.SrcIP = putIP(t.SrcIP, c.Src.Addr())
	t.DstIP = putIP(t.DstIP, c.Dst.Addr())
	t.SrcPort, t.DstPort = c.Src.Port(), c.Dst.Port()
}

// putIP writes a into buf's backing array (4 bytes for IPv4, as netlink
// hands them out).
func putIP(buf net.IP, a netip.Addr) net.IP {
	switch {
	case a.Is4():
		b := a.As4()
		return append(buf[:0], b[:]...)
	case a.IsValid():
		b := a.As16()
		return append(buf[:0], b[:]...)
	}
	return buf[:0]
}

// cloneFlow copies the tuples of a reused flow.
func cloneFlow(f *netlink.ConntrackFlow) *netlink.ConntrackFlow {
	c := &netlink.ConntrackFlow{FamilyType: f.FamilyType, Forward: f.Forward, Reverse: f.Reverse}
	for _, ip := range []*net.IP{&c.Forward.SrcIP, &c.Forward.DstIP, &c.Reverse.SrcIP, &c.Reverse.DstIP} {
		*ip = append(net.IP(nil), *ip...)
	}
	return c
}
