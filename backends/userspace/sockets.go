package userspace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
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
	// ListenTransparentTCP and ListenTransparentUDP open sockets with
	// IP_TRANSPARENT on addr, which need not be a local address.
	ListenTransparentTCP(addr netip.AddrPort) (*net.TCPListener, error)
	ListenTransparentUDP(addr netip.AddrPort) (*net.UDPConn, error)
	// DialTCPFrom and DialUDPFrom connect to an endpoint from src (a
	// client's address, not local: IP_TRANSPARENT), on an ephemeral port.
	DialTCPFrom(ctx context.Context, src netip.Addr, addr netip.AddrPort) (*net.TCPConn, error)
	DialUDPFrom(src netip.Addr, addr netip.AddrPort) (*net.UDPConn, error)
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

// transparent sets IP_TRANSPARENT (IPV6_TRANSPARENT) before bind: the
// socket may bind to, and send from, an address that is not local, and
// xt_socket's --transparent finds it.
func transparent(network, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if network[len(network)-1] == '6' {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1)
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("set IP_TRANSPARENT: %w", serr)
	}
	return nil
}

// ListenTransparentTCP implements Sockets.
func (HostSockets) ListenTransparentTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	addr = unmapAddrPort(addr)
	lc := net.ListenConfig{Control: transparent}
	ln, err := lc.Listen(context.Background(), network("tcp", addr.Addr()), addr.String())
	if err != nil {
		return nil, err
	}
	return ln.(*net.TCPListener), nil
}

// ListenTransparentUDP implements Sockets.
func (HostSockets) ListenTransparentUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	addr = unmapAddrPort(addr)
	lc := net.ListenConfig{Control: transparent}
	c, err := lc.ListenPacket(context.Background(), network("udp", addr.Addr()), addr.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// DialTCPFrom implements Sockets.
func (HostSockets) DialTCPFrom(ctx context.Context, src netip.Addr, addr netip.AddrPort) (*net.TCPConn, error) {
	addr = unmapAddrPort(addr)
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src.Unmap(), 0)), Control: transparent}
	c, err := d.DialContext(ctx, network("tcp", addr.Addr()), addr.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// DialUDPFrom implements Sockets.
func (HostSockets) DialUDPFrom(src netip.Addr, addr netip.AddrPort) (*net.UDPConn, error) {
	addr = unmapAddrPort(addr)
	d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(src.Unmap(), 0)), Control: transparent}
	c, err := d.Dial(network("udp", addr.Addr()), addr.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}
