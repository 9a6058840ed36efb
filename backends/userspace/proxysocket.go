package userspace

import (
	"net/netip"
	"sync/atomic"
	"time"
)

// proxySocket is one listening proxy socket and its balancer.
type proxySocket interface {
	// port is the socket's (ephemeral) port.
	port() uint16
	// balancer picks the socket's endpoints.
	balancer() *balancer
	// update swaps the endpoints and affinity without touching the
	// socket. UDP sessions to removed endpoints end; TCP connections
	// drain.
	update(eps []netip.AddrPort, affinity time.Duration)
	// close stops accepting. With drain, established TCP connections go
	// on until they end; without, everything is closed.
	close(drain bool)
	// setTransparency says which connections are opened from the
	// client's address (nil: none).
	setTransparency(t *transparency)
	// transparency is the one set last (nil: none).
	transparency() *transparency
	// active counts live TCP connections (including ones being set up)
	// and UDP sessions.
	active() int
	// endTo aborts the TCP connections relayed to any of the addresses
	// and returns how many (vanished.go).
	endTo(addrs map[netip.Addr]bool) int
	// counts is the socket's traffic (servicetraffic.go).
	counts() *trafficCount
}

// proxyBase is what TCP and UDP proxy sockets share.
type proxyBase struct {
	label   string // service port, for logs and metrics
	bal     *balancer
	sockets Sockets
	pm      *portMetrics
	tr      *trState
	traffic *trafficCount
}

// trState is a socket's transparency, swapped by syncs.
type trState struct {
	cur    atomic.Pointer[transparency]
	warned atomic.Bool // a refusal was logged
}

func (b *proxyBase) balancer() *balancer { return b.bal }

func (b *proxyBase) counts() *trafficCount { return b.traffic }
