package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// netnsPath turns a bare namespace name (as shown by `ip netns list`) into its
// bind-mount path; anything containing a slash is taken as a path already.
func netnsPath(nameOrPath string) string {
	if strings.Contains(nameOrPath, "/") {
		return nameOrPath
	}
	return filepath.Join("/run/netns", nameOrPath)
}

// listenInNetns creates a TCP listener for addr inside the network namespace
// at nsPath. The returned listener works from any goroutine: a socket stays in
// the namespace it was created in.
func listenInNetns(nsPath, addr string) (net.Listener, error) {
	var ln net.Listener
	err := runInNetns(nsPath, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s in %s: %w", addr, nsPath, err)
	}
	return ln, nil
}

// runInNetns runs fn on a fresh OS thread switched into the namespace at
// nsPath. If the thread cannot be switched back it stays locked, so the Go
// runtime terminates it instead of reusing a thread in the wrong namespace.
func runInNetns(nsPath string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := runLocked(nsPath, fn)
		if restored {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// runLocked must run on a locked OS thread. It reports whether the thread is
// back in its original namespace.
func runLocked(nsPath string, fn func() error) (bool, error) {
	origin, err := netns.Get()
	if err != nil {
		return true, fmt.Errorf("get current netns: %w", err)
	}
	defer origin.Close()
	target, err := netns.GetFromPath(nsPath)
	if err != nil {
		return true, fmt.Errorf("open netns %s: %w", nsPath, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return true, fmt.Errorf("enter netns %s: %w", nsPath, err)
	}
	fnErr := fn()
	if err := netns.Set(origin); err != nil {
		return false, fmt.Errorf("return from netns %s: %w", nsPath, err)
	}
	return true, fnErr
}

// dialInNetns returns a dialFunc whose sockets are created inside nsPath: the
// connect happens on a thread switched into the namespace, and the socket
// keeps that namespace afterwards.
func dialInNetns(nsPath string) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := runInNetns(nsPath, func() error {
			var d net.Dialer
			var err error
			conn, err = d.DialContext(ctx, network, addr)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("dial %s in %s: %w", addr, nsPath, err)
		}
		return conn, nil
	}
}
