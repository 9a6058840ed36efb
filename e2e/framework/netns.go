package framework

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netns"
)

// NetnsPath is where `ip netns add NAME` bind-mounts a namespace.
func NetnsPath(name string) string { return filepath.Join("/run/netns", name) }

// InNetns runs fn on a dedicated OS thread switched into the named network
// namespace. Sockets created by fn stay in that namespace and can be used from
// any goroutine afterwards. If the thread cannot be switched back it stays
// locked, so the Go runtime discards it instead of reusing it.
func InNetns(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := runLockedInNetns(NetnsPath(name), fn)
		if restored {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// runLockedInNetns must run on a locked OS thread; it reports whether the
// thread is back in its original namespace.
func runLockedInNetns(path string, fn func() error) (bool, error) {
	origin, err := netns.Get()
	if err != nil {
		return true, fmt.Errorf("get current netns: %w", err)
	}
	defer origin.Close()
	target, err := netns.GetFromPath(path)
	if err != nil {
		return true, fmt.Errorf("open netns %s: %w", path, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return true, fmt.Errorf("enter netns %s: %w", path, err)
	}
	fnErr := fn()
	if err := netns.Set(origin); err != nil {
		return false, fmt.Errorf("return from netns %s: %w", path, err)
	}
	return true, fnErr
}

// DialContextIn dials addr with a socket created inside the named namespace.
func DialContextIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := InNetns(ns, func() error {
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s %s in netns %s: %w", network, addr, ns, err)
	}
	return conn, nil
}

// Dialer returns a DialContext function whose connections start in ns; use it
// for http.Transport.DialContext or rest.Config.Dial.
func Dialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return DialContextIn(ctx, ns, network, addr)
	}
}

// HTTPClient is an HTTP client whose connections start in ns, e.g. to read a
// daemon's /healthz bound to 127.0.0.1 inside the node namespace.
func HTTPClient(ns string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: Dialer(ns), DisableKeepAlives: true}}
}
