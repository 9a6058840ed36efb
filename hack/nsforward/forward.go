package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"k8s.io/klog/v2"
)

// dialFunc opens the upstream connection; net.Dialer.DialContext in
// production, so the connection is made from nsforward's own namespace.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// forwarder copies every connection accepted on a listener to target.
type forwarder struct {
	target string
	dial   dialFunc
}

// serve accepts connections until ctx is cancelled or the listener fails.
func (f *forwarder) serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		go f.handle(ctx, conn)
	}
}

// handle dials target for one accepted connection and pipes both ways.
func (f *forwarder) handle(ctx context.Context, in net.Conn) {
	defer in.Close()
	out, err := f.dial(ctx, "tcp", f.target)
	if err != nil {
		klog.ErrorS(err, "Dial target failed", "target", f.target, "client", in.RemoteAddr())
		return
	}
	defer out.Close()
	klog.V(4).InfoS("Forwarding", "client", in.RemoteAddr(), "target", f.target)
	pipe(in, out)
}

// pipe copies a->b and b->a until both directions have ended, half-closing
// the writer side when its reader reaches EOF so request/response protocols
// that rely on shutdown(SHUT_WR) keep working.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		if _, err := io.Copy(dst, src); err != nil && !errors.Is(err, net.ErrClosed) {
			klog.V(4).InfoS("Copy ended", "err", err)
		}
		closeWrite(dst)
		done <- struct{}{}
	}
	go copyHalf(a, b)
	go copyHalf(b, a)
	<-done
	<-done
}

// closeWrite half-closes c if it supports it, and fully closes it otherwise.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
