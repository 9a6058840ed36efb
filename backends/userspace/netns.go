package userspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
)

// NetnsSockets opens sockets inside a named network namespace
// (/run/netns/NAME). A socket keeps the namespace it was created in, so
// only its creation switches namespace: on a goroutine locked to its OS
// thread, which switches back afterwards. If switching back fails the
// thread stays locked and the runtime discards it when the goroutine
// ends, so no other goroutine ever runs in the wrong namespace.
type NetnsSockets struct {
	name   string
	target netns.NsHandle
	origin netns.NsHandle
	host   HostSockets
}

var _ Sockets = (*NetnsSockets)(nil)

// NewNetnsSockets opens the namespace. Close releases it.
func NewNetnsSockets(name string) (*NetnsSockets, error) {
	target, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %q: %w", name, err)
	}
	origin, err := originNetns()
	if err != nil {
		target.Close()
		return nil, err
	}
	return &NetnsSockets{name: name, target: target, origin: origin}, nil
}

// originNetns returns the namespace unlocked threads of this process run
// in, read from a thread of that kind.
func originNetns() (netns.NsHandle, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		h, err := netns.Get()
		ch <- result{h, err}
	}()
	r := <-ch
	if r.err != nil {
		return 0, fmt.Errorf("open current network namespace: %w", r.err)
	}
	return r.h, nil
}

// Close releases the namespace handles; sockets already open keep
// working.
func (s *NetnsSockets) Close() error {
	return errors.Join(s.target.Close(), s.origin.Close())
}

// do runs fn inside the namespace.
func (s *NetnsSockets) do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(s.target); err != nil {
			runtime.UnlockOSThread() // still in the original namespace
			done <- fmt.Errorf("enter network namespace %q: %w", s.name, err)
			return
		}
		err := fn()
		if rerr := netns.Set(s.origin); rerr != nil {
			// Deliberately stay locked: the thread dies with the goroutine.
			done <- errors.Join(err, fmt.Errorf("leave network namespace %q: %w", s.name, rerr))
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// ListenTCP implements Sockets.
func (s *NetnsSockets) ListenTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	var l *net.TCPListener
	err := s.do(func() (err error) { l, err = s.host.ListenTCP(addr); return err })
	return l, err
}

// ListenUDP implements Sockets.
func (s *NetnsSockets) ListenUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := s.do(func() (err error) { c, err = s.host.ListenUDP(addr); return err })
	return c, err
}

// DialTCP implements Sockets. The whole dial runs in the namespace (the
// socket is created and connected in one call).
func (s *NetnsSockets) DialTCP(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error) {
	var c *net.TCPConn
	err := s.do(func() (err error) { c, err = s.host.DialTCP(ctx, addr); return err })
	return c, err
}

// DialUDP implements Sockets.
func (s *NetnsSockets) DialUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := s.do(func() (err error) { c, err = s.host.DialUDP(addr); return err })
	return c, err
}

// ListenTransparentTCP implements Sockets.
func (s *NetnsSockets) ListenTransparentTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	var l *net.TCPListener
	err := s.do(func() (err error) { l, err = s.host.ListenTransparentTCP(addr); return err })
	return l, err
}

// ListenTransparentUDP implements Sockets.
func (s *NetnsSockets) ListenTransparentUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := s.do(func() (err error) { c, err = s.host.ListenTransparentUDP(addr); return err })
	return c, err
}

// DialTCPFrom implements Sockets.
func (s *NetnsSockets) DialTCPFrom(ctx context.Context, src netip.Addr, addr netip.AddrPort) (*net.TCPConn, error) {
	var c *net.TCPConn
	err := s.do(func() (err error) { c, err = s.host.DialTCPFrom(ctx, src, addr); return err })
	return c, err
}

// DialUDPFrom implements Sockets.
func (s *NetnsSockets) DialUDPFrom(src netip.Addr, addr netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := s.do(func() (err error) { c, err = s.host.DialUDPFrom(src, addr); return err })
	return c, err
}

// Reserve implements PortReserver inside the namespace.
func (s *NetnsSockets) Reserve(proto v1.Protocol, addr netip.AddrPort) (io.Closer, error) {
	var c io.Closer
	err := s.do(func() (err error) { c, err = HostPortReserver{}.Reserve(proto, addr); return err })
	return c, err
}

// LocalAddrs implements PortReserver inside the namespace.
func (s *NetnsSockets) LocalAddrs() ([]netip.Addr, error) {
	var out []netip.Addr
	err := s.do(func() (err error) { out, err = HostPortReserver{}.LocalAddrs(); return err })
	return out, err
}
