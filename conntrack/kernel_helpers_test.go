package conntrack

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// netlinkTableIn opens the conntrack table of the named namespace.
func netlinkTableIn(tb testing.TB, name string) *NetlinkTable {
	tb.Helper()
	h, err := netns.GetFromName(name)
	if err != nil {
		tb.Fatal(err)
	}
	defer h.Close()
	tbl, err := NewNetlinkTable(h)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(tbl.Close)
	return tbl
}

// udpServer answers every datagram with its name and counts them.
type udpServer struct {
	conn     *net.UDPConn
	received atomic.Int64
}

func startServer(tb testing.TB, ns, name string, at netip.AddrPort) *udpServer {
	tb.Helper()
	s := &udpServer{}
	err := kerneltest.InNetns(ns, func() (err error) {
		s.conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(at))
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.conn.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := s.conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			s.received.Add(1)
			_, _ = s.conn.WriteToUDPAddrPort([]byte(name), from)
		}
	}()
	return s
}

// udpClient sends continuously to one address from a fixed source port,
// as a resolver does, and collects the names that answer.
type udpClient struct {
	conn    *net.UDPConn
	sent    atomic.Int64
	replies chan string
	stop    chan struct{}
}

func startClient(tb testing.TB, ns string, port uint16, to netip.AddrPort) *udpClient {
	tb.Helper()
	c := &udpClient{replies: make(chan string, 4096), stop: make(chan struct{})}
	err := kerneltest.InNetns(ns, func() (err error) {
		c.conn, err = net.ListenUDP("udp", &net.UDPAddr{Port: int(port)})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { close(c.stop); c.conn.Close() })
	go c.receive()
	go c.send(to)
	return c
}

func (c *udpClient) send(to netip.AddrPort) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		// Errors (EPERM from REJECT) are expected in some tests.
		if _, err := c.conn.WriteToUDPAddrPort([]byte("ping"), to); err == nil || errors.Is(err, os.ErrPermission) {
			c.sent.Add(1)
		}
	}
}

func (c *udpClient) receive() {
	buf := make([]byte, 64)
	for {
		n, _, err := c.conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // ICMP errors surface here on some kernels
		}
		select {
		case c.replies <- string(buf[:n]):
		default:
		}
	}
}

// patience bounds every wait for the network; nothing asserts on time.
const patience = 20 * time.Second

// drain forgets replies received so far.
func (c *udpClient) drain() {
	for {
		select {
		case <-c.replies:
		default:
			return
		}
	}
}

// next returns the next n replies.
func (c *udpClient) next(tb testing.TB, n int) []string {
	tb.Helper()
	var out []string
	deadline := time.After(patience)
	for len(out) < n {
		select {
		case r := <-c.replies:
			out = append(out, r)
		case <-deadline:
			tb.Fatalf("got %d of %d replies (%v)", len(out), n, out)
		}
	}
	return out
}

// waitFor waits until name answers, then requires the next n replies to
// come from name too.
func (c *udpClient) waitFor(tb testing.TB, name string, n int) {
	tb.Helper()
	deadline := time.After(patience)
	for found := false; !found; {
		select {
		case r := <-c.replies:
			found = r == name
		case <-deadline:
			tb.Fatalf("no reply from %s", name)
		}
	}
	for _, r := range c.next(tb, n) {
		if r != name {
			tb.Fatalf("after %s answered, a reply came from %s", name, r)
		}
	}
}

// waitSent waits until the client sent n more datagrams.
func (c *udpClient) waitSent(tb testing.TB, n int64) {
	tb.Helper()
	target := c.sent.Load() + n
	deadline := time.Now().Add(patience)
	for c.sent.Load() < target {
		if time.Now().After(deadline) {
			tb.Fatal("client stopped sending")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flowFrom returns the UDP entry of the client's flow to the service, or
// nil.
func flowFrom(tb testing.TB, tbl *NetlinkTable, clientPort uint16, svc netip.AddrPort) *netlink.ConntrackFlow {
	tb.Helper()
	flows, err := tbl.List(v1.IPv4Protocol, protoUDP)
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range flows {
		t := tupleOf(f)
		if t.origDst == svc && f.Forward.SrcPort == clientPort {
			return f
		}
	}
	return nil
}
