package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// tempNetns creates a named network namespace for one test and deletes it
// afterwards. It needs root and iproute2.
func tempNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2")
	}
	name := fmt.Sprintf("sy-nsfwd-%d", os.Getpid())
	ip := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("netns", "add", name)
	t.Cleanup(func() { ip("netns", "del", name) })
	ip("-n", name, "link", "set", "lo", "up")
	return netnsPath(name)
}

// serveInNetns listens on loopback inside ns and answers every connection
// with "inside"; it returns the listening address.
func serveInNetns(t *testing.T, ns string) string {
	t.Helper()
	ln, err := listenInNetns(ns, "127.0.0.1:0")
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
			_, _ = c.Write([]byte("inside"))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestListenInNetnsIsOnlyReachableInside(t *testing.T) {
	ns := tempNetns(t)
	addr := serveInNetns(t, ns)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("dial %s from the test's namespace succeeded; the socket is not in %s", addr, ns)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s from the test's namespace: %v, want connection refused", addr, err)
	}
	err := runInNetns(ns, func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("dial %s inside %s: %v", addr, ns, err)
	}
}

func TestDialInNetnsReachesOnlyInside(t *testing.T) {
	ns := tempNetns(t)
	addr := serveInNetns(t, ns)
	c, err := dialInNetns(ns)(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s inside %s: %v", addr, ns, err)
	}
	buf, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(buf) != "inside" {
		t.Fatalf("read %q, %v; want %q", buf, err, "inside")
	}
	// The calling goroutine's thread is back in the test's namespace.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("plain dial of %s reached the namespace's listener", addr)
	}
}
