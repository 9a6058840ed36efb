package conntrack

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

var (
	kWebA    = addrPort("10.244.0.10:8080")
	kWebB    = addrPort("10.244.0.11:8080")
	kWebSvc  = addrPort("10.96.0.20:80")
	kWebName = portName("web", "http", v1.ProtocolTCP)
)

// tcpEcho echoes what it reads, in a pod namespace.
func tcpEcho(t *testing.T, ns string, at netip.AddrPort) {
	kerneltest.ServeTCP(t, ns, at.String(), func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// webConn connects from the node to the web service and checks an echo.
func webConn(t *testing.T, node string) net.Conn {
	t.Helper()
	var c net.Conn
	err := kerneltest.InNetns(node, func() (err error) {
		c, err = net.DialTimeout("tcp", kWebSvc.String(), 3*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := echo(c, time.Second); err != nil {
		t.Fatalf("echo through the service: %v", err)
	}
	return c
}

// echo sends a byte and waits for it back.
func echo(c net.Conn, within time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(within))
	if _, err := c.Write([]byte("x")); err != nil {
		return err
	}
	_, err := io.ReadFull(c, make([]byte, 1))
	return err
}

func webState(eps ...netip.AddrPort) *proxier.State {
	return kernelServiceState(kWebName, kWebSvc, eps...)
}

// TestKernelVanishedEndpointReset: two clients hold connections through
// the service to pod A; A's network goes away (its veth is deleted, as
// when its node dies) and A leaves the slices, so the sync points the
// service at B. Conntrack still sends both clients' packets to A: the
// first client, before the reaper acts, gets silence. Once A has been
// gone for the grace period, the reaper deletes the entries, and the
// second client's next packet is NATed afresh to B, whose kernel answers
// with a reset: ECONNRESET for the first packet sent after the grace
// period.
func TestKernelVanishedEndpointReset(t *testing.T) {
	n := setupKernelNet(t)
	tcpEcho(t, n.podA, kWebA)
	tcpEcho(t, n.podB, kWebB)
	dnat := func(ep netip.AddrPort) []string {
		return []string{"-d", kWebSvc.Addr().String() + "/32", "-p", "tcp", "--dport", "80",
			"-j", "DNAT", "--to-destination", ep.String()}
	}
	n.ipt(t, append([]string{"-t", "nat", "-A", "SVC"}, dnat(kWebA)...)...)
	silent, reset := webConn(t, n.node), webConn(t, n.node)

	const grace = time.Second
	r, err := NewVanishedReaper(n.table, VanishedConfig{Grace: grace})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.PostSync(context.Background(), webState(kWebA), &proxier.Diff{Full: true})

	kerneltest.Run(t, "ip", "-n", n.node, "link", "del", "va")
	n.ipt(t, append([]string{"-t", "nat", "-R", "SVC", "1"}, dnat(kWebB)...)...)
	gone := time.Now()
	r.PostSync(context.Background(), webState(kWebB), &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{kWebName: {}}})

	if err := echo(silent, grace/2); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("before the grace period ended: %v, want silence (a timeout)", err)
	}
	// The reset client's first packet after the endpoint left goes out
	// once the grace period is over: the reset comes at once. (A packet
	// sent into the silence waits for its retransmission instead.)
	time.Sleep(time.Until(gone.Add(grace + 200*time.Millisecond)))
	sent := time.Now()
	if err := echo(reset, time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after the grace period: %v, want ECONNRESET", err)
	}
	t.Logf("reset %v after the packet", time.Since(sent).Round(time.Microsecond))
	t.Logf("ECONNRESET %v after the endpoint left (grace %v)", time.Since(gone).Round(time.Millisecond), grace)
}
