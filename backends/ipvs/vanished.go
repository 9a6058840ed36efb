package ipvs

import (
	"net/netip"

	"k8s.io/klog/v2"
)

// EndConnectionsTo deletes at once the draining real servers at the
// addresses (--reset-vanished-endpoint-connections, called by
// conntrack.VanishedReaper once an endpoint has been out of every
// EndpointSlice for the grace period). Graceful termination would keep
// them at weight 0 until their connections end or the timeout passes,
// but a vanished endpoint's connections never end: they hang. Once the
// real server is gone, expire_nodest_conn=1 makes the kernel expire each
// of its connections at their next packet, which is scheduled afresh (a
// live endpoint answers it with a reset). It returns the number of
// connections the deleted real servers held.
func (b *Backend) EndConnectionsTo(addrs []netip.Addr) int {
	set := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		set[a.Unmap()] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, k := range sortedKeys(keysOf(b.graceful.items)) {
		n += b.endDraining(k, set)
	}
	return n
}

// endDraining deletes the queued real servers of one virtual server whose
// address is in set.
func (b *Backend) endDraining(k vsKey, set map[netip.Addr]bool) int {
	dests, err := b.k.IPVS.GetDestinations(k.handle())
	if err != nil {
		if !isMissing(err) {
			klog.ErrorS(err, "Listing real servers to end vanished endpoints' connections failed", "virtualServer", k)
		}
		return 0
	}
	n := 0
	for _, d := range dests {
		ap, ok := destKey(d)
		if _, queued := b.graceful.items[k][ap]; !ok || !queued || !set[ap.Addr()] || d.Weight != 0 {
			continue
		}
		if err := ignoreMissing(b.k.IPVS.DelDestination(k.handle(), d)); err != nil {
			klog.ErrorS(err, "Deleting a vanished endpoint's real server failed", "virtualServer", k, "realServer", ap)
			continue
		}
		b.graceful.remove(k, ap)
		n += d.ActiveConnections + d.InactiveConnections
	}
	return n
}
