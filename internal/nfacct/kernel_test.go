package nfacct

import (
	"net"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// TestKernelCounter creates a counter in a fresh namespace, has an
// iptables rule count UDP datagrams with it, and reads the count back.
func TestKernelCounter(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "sy-nfacct")
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n, err := New(h)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Packets(LocalhostNodePortsAccepted); err == nil {
		t.Fatal("a fresh namespace already has the counter")
	}
	for range 2 { // the second Ensure finds it
		if err := n.Ensure(LocalhostNodePortsAccepted); err != nil {
			t.Fatal(err)
		}
	}
	kerneltest.Run(t, "ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", "-o", "lo", "-p", "udp",
		"--dport", "9", "-m", "nfacct", "--nfacct-name", LocalhostNodePortsAccepted)
	err = kerneltest.InNetns(ns, func() error {
		// Unconnected, so the port unreachable the first datagram
		// draws does not fail the next writes.
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer c.Close()
		for range 3 {
			if _, err := c.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := n.Packets(LocalhostNodePortsAccepted)
	if err != nil || got != 3 {
		t.Fatalf("counter = %d (%v), want 3 datagrams", got, err)
	}
}
