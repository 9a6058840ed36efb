package userspace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// Sockets opens the proxy's sockets: its listeners and its connections
// to endpoints. Where a socket is opened decides its network namespace for
// its whole life.
type Sockets interface {
	// ListenTCP listens on addr (port 0: an ephemeral port).
	ListenTCP(addr netip.AddrPort) (*net.TCPListener, error)
	// ListenUDP binds a UDP socket to addr (port 0: an ephemeral port).
	ListenUDP(addr netip.AddrPort) (*net.UDPConn, error)
	// DialTCP connects to an endpoint; ctx bounds the attempt.
	DialTCP(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error)
	// DialUDP opens a UDP socket connected to an endpoint.
	DialUDP(addr netip.AddrPort) (*net.UDPConn, error)
}

// HostSockets opens sockets in the calling process's network namespace.
type HostSockets struct{}

var _ Sockets = HostSockets{}

// network returns "tcp4"/"tcp6" or "udp4"/"udp6": a wildcard listener of
// one family only (IPV6_V6ONLY for "6").
func network(base string, a netip.Addr) string {
	if a.Unmap().Is4() {
		return base + "4"
	}
	return base + "6"
}

func unmapAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// ListenTCP implements Sockets.
func (HostSockets) ListenTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	addr = unmapAddrPort(addr)
	return net.ListenTCP(network("tcp", addr.Addr()), net.TCPAddrFromAddrPort(addr))
}

// ListenUDP implements Sockets.
func (HostSockets) ListenUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	addr = unmapAddrPort(addr)
	return net.ListenUDP(network("udp", addr.Addr()), net.UDPAddrFromAddrPort(addr))
}

// DialTCP implements Sockets.
func (HostSockets) DialTCP(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error) {
	addr = unmapAddrPort(addr)
	var d net.Dialer
	c, err := d.DialContext(ctx, network("tcp", addr.Addr()), addr.String())
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("dial %s: got a %T", addr, c)
	}
	return tc, nil
}

// DialUDP implements Sockets.
func (HostSockets) DialUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	addr = unmapAddrPort(addr)
	return net.DialUDP(network("udp", addr.Addr()), nil, net.UDPAddrFromAddrPort(addr))
}
