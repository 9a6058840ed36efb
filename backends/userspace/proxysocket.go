package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/klog/v2"
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

// dialTCP connects to ep for client, from the client's address when the
// socket's transparency says so.
func (b *proxyBase) dialTCP(ctx context.Context, client netip.Addr, ep netip.AddrPort) (*net.TCPConn, error) {
	if b.transparency().from(client, ep) {
		c, err := b.sockets.DialTCPFrom(ctx, client, ep)
		if err == nil || !b.transparencyRefused(err) {
			return c, err
		}
	}
	return b.sockets.DialTCP(ctx, ep)
}

// dialUDP opens a UDP session socket to ep for client, likewise.
func (b *proxyBase) dialUDP(client netip.Addr, ep netip.AddrPort) (*net.UDPConn, error) {
	if b.transparency().from(client, ep) {
		c, err := b.sockets.DialUDPFrom(client, ep)
		if err == nil || !b.transparencyRefused(err) {
			return c, err
		}
	}
	return b.sockets.DialUDP(ep)
}

// transparencyRefused reports (and logs once per socket) a kernel that
// will not let the proxy use a client's address (no CAP_NET_ADMIN): the
// connection is then opened from the node, as without Transparent.
func (b *proxyBase) transparencyRefused(err error) bool {
	if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EACCES) {
		return false
	}
	if b.tr.warned.CompareAndSwap(false, true) {
		klog.ErrorS(err, "Cannot connect from the client's address; connecting from the node", "servicePort", b.label)
	}
	return true
}

func (b *proxyBase) setTransparency(t *transparency) {
	if b.tr != nil {
		b.tr.cur.Store(t)
	}
}

func (b *proxyBase) transparency() *transparency {
	if b.tr == nil {
		return nil
	}
	return b.tr.cur.Load()
}
