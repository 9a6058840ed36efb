package kerneltest

import (
	"net"
	"testing"
)

// ServeTCP listens on addr ("ip:port", ":port") inside the named
// namespace and runs handle for every accepted connection, on its own
// goroutine, closing the connection when handle returns. The listener
// closes when the test ends.
func ServeTCP(tb testing.TB, ns, addr string, handle func(net.Conn)) {
	tb.Helper()
	var ln net.Listener
	err := InNetns(ns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}
