package userspace

import (
	"iter"
	"net/netip"
)

// endAll aborts the connections to addrs of every socket of the groups:
// --reset-vanished-endpoint-connections for the relays
// (Backend.EndConnectionsTo, LocalhostNodePorts.EndConnectionsTo).
func endAll[S interface{ endTo(map[netip.Addr]bool) int }](addrs []netip.Addr, groups ...iter.Seq[S]) int {
	set := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		set[a.Unmap()] = true
	}
	n := 0
	for _, g := range groups {
		for s := range g {
			n += s.endTo(set)
		}
	}
	return n
}
