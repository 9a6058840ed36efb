package userspace

import (
	"iter"
	"maps"
	"net"
	"net/netip"
	"slices"
)

// EndConnectionsTo aborts every relayed TCP connection whose endpoint
// address is one of addrs (both sides get a reset) and returns how many.
// It is --reset-vanished-endpoint-connections for the relay: an endpoint
// that left every EndpointSlice for the grace period is gone, and a
// connection still relayed to it would hang until the client's timeouts.
// Connections to every other endpoint, draining ones included, go on.
func (b *Backend) EndConnectionsTo(addrs []netip.Addr) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return endAll(addrs, maps.Values(b.sockets), slices.Values(b.draining))
}

// EndConnectionsTo is Backend.EndConnectionsTo for the localhost NodePort
// listeners.
func (l *LocalhostNodePorts) EndConnectionsTo(addrs []netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return endAll(addrs, maps.Values(l.proxies))
}

// endAll aborts the connections to addrs of every socket of the groups.
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

// endTo aborts the socket's connections to the addresses.
func (p *tcpProxy) endTo(addrs map[netip.Addr]bool) int {
	p.mu.Lock()
	var ended []*net.TCPConn
	for client, up := range p.conns {
		if a, ok := up.RemoteAddr().(*net.TCPAddr); ok && addrs[a.AddrPort().Addr().Unmap()] {
			ended = append(ended, client, up)
			delete(p.conns, client)
		}
	}
	p.mu.Unlock()
	for _, c := range ended {
		abort(c)
	}
	return len(ended) / 2
}

// endTo: UDP sessions to an endpoint end when it leaves the balancer.
func (p *udpProxy) endTo(map[netip.Addr]bool) int { return 0 }
