package userspace

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// dialHolding connects to addr and sends msg without half-closing: the
// test server waits for the rest, so the connection stays open and
// silent, as one to a dead endpoint does.
func dialHolding(t *testing.T, addr netip.AddrPort, msg string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEndConnectionsTo: the relayed connections to a vanished endpoint's
// address are reset; those to another endpoint go on.
func TestEndConnectionsTo(t *testing.T) {
	env := newTestEnv(t)
	a := startTCPServer(t, "a") // 127.0.0.1
	lnB, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	b := serveTCP(t, "b", lnB)
	addr := tcpService(t, env, 0, a.addr(), b.addr())
	// One after the other: the round-robin gives a (127.0.0.1) the first.
	toA := dialHolding(t, addr, "x")
	eventually(t, "a connected", func() bool { return a.accepted() == 1 })
	toB := dialHolding(t, addr, "y")
	eventually(t, "b connected", func() bool { return b.accepted() == 1 })

	if n := env.b.EndConnectionsTo([]netip.Addr{a.addr().Addr()}); n != 1 {
		t.Errorf("ended %d connections, want 1", n)
	}
	toA.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := toA.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("client of the vanished endpoint: %v, want ECONNRESET", err)
	}
	toB.CloseWrite()
	toB.SetReadDeadline(time.Now().Add(5 * time.Second))
	if out, err := io.ReadAll(toB); err != nil || string(out) != "b:y" {
		t.Errorf("client of the other endpoint: %q, %v; want b:y", out, err)
	}
}
