package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
)

// upperServer answers each connection with the upper-cased bytes it read, once
// the client half-closes: it proves data flows both ways and that EOF is
// propagated through the forwarder.
func upperServer(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				_, _ = c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	return ln
}

func startForwarder(t *testing.T, target string) net.Addr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var d net.Dialer
	f := &forwarder{target: target, dial: d.DialContext}
	done := make(chan error, 1)
	go func() { done <- f.serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v after cancel, want nil", err)
		}
	})
	return ln.Addr()
}

func roundTrip(t *testing.T, addr net.Addr, msg string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestForwarderCopiesBothWays(t *testing.T) {
	backend := upperServer(t)
	addr := startForwarder(t, backend.Addr().String())
	for _, msg := range []string{"hello", "", strings.Repeat("x", 1<<20)} {
		if got, want := roundTrip(t, addr, msg), strings.ToUpper(msg); got != want {
			t.Errorf("round trip of %d bytes: got %d bytes, want %d", len(msg), len(got), len(want))
		}
	}
}

func TestForwarderClosesClientWhenTargetDown(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := dead.Addr().String()
	dead.Close()
	addr := startForwarder(t, target)
	if got := roundTrip(t, addr, ""); got != "" {
		t.Errorf("got %q from a dead target, want an empty, closed stream", got)
	}
}

func TestNetnsPath(t *testing.T) {
	for in, want := range map[string]string{
		"sy1-node":           "/run/netns/sy1-node",
		"/proc/42/ns/net":    "/proc/42/ns/net",
		"./relative/ns-file": "./relative/ns-file",
	} {
		if got := netnsPath(in); got != want {
			t.Errorf("netnsPath(%q) = %q, want %q", in, got, want)
		}
	}
}
