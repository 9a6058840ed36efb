package conntrack

import (
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"
)

// flowTuple is the part of a conntrack entry the reconciler decides on.
type flowTuple struct {
	proto    uint8
	origDst  netip.AddrPort
	replySrc netip.AddrPort
}

// tupleOf converts a netlink flow. Unparseable addresses become the zero
// netip.Addr, which matches no service address.
func tupleOf(f *netlink.ConntrackFlow) flowTuple {
	return flowTuple{
		proto:    f.Forward.Protocol,
		origDst:  netip.AddrPortFrom(addrOf(f.Forward.DstIP), f.Forward.DstPort),
		replySrc: netip.AddrPortFrom(addrOf(f.Reverse.SrcIP), f.Reverse.SrcPort),
	}
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// staleFilter is the netlink.CustomConntrackFilter handed to the delete
// pass: it matches the flows the index says are stale, among those the
// kernel sends for its scope (Scoped), and counts them.
type staleFilter struct {
	index serviceIndex
	scope []ctnetlink.Filter
	seen  atomic.Int64 // called from a goroutine per dump
}

var (
	_ netlink.CustomConntrackFilter = (*staleFilter)(nil)
	_ Scoped                        = (*staleFilter)(nil)
)

// Scope implements Scoped.
func (s *staleFilter) Scope() []ctnetlink.Filter { return s.scope }

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (s *staleFilter) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	s.seen.Add(1)
	t := tupleOf(f)
	if !s.index.isStale(&t) {
		return false
	}
	if v := klog.V(4); v.Enabled() {
		v.InfoS("Deleting stale conntrack entry", "proto", t.proto,
			"origDst", t.origDst, "replySrc", t.replySrc, "origSrc", f.Forward.SrcIP)
	}
	return true
}
