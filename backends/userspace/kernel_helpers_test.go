package userspace

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/conntrack"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// The topology: a client namespace and pod namespaces around a node
// namespace that runs the backend.
//
//	client 192.168.0.20 --vc1|vc0-- 192.168.0.10 node 10.244.1.1 (br0)
//	                                  br0 --vpN0|vpN1-- 10.244.1.(N+1) podN
const (
	nsNodeIP   = "192.168.0.10"
	nsClientIP = "192.168.0.20"
	bridgeIP   = "10.244.1.1"
	podCIDR    = "10.244.0.0/16"
	podPort    = 8080
)

// kernelLockWait bounds the wait for the xtables lock, which legacy
// iptables shares with every other user of the machine (other tests).
const kernelLockWait = 60

func podIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, 1, byte(i + 2)}) }

func podAddr(i int) netip.AddrPort { return netip.AddrPortFrom(podIP(i), podPort) }

// topology is the namespaces of one kernel test and socket openers for
// each.
type topology struct {
	node, client string
	pods         []string
	nodeSockets  *NetnsSockets
	clientSocks  *NetnsSockets
	podSockets   []*NetnsSockets
	podServers   []*tcpServer
}

func netnsSockets(tb testing.TB, name string) *NetnsSockets {
	tb.Helper()
	s, err := NewNetnsSockets(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// newTopology builds the namespaces, links and routes for pods pods.
func newTopology(tb testing.TB, pods int) *topology {
	tb.Helper()
	tp := &topology{node: kerneltest.NewNetns(tb, "sy-us-"+"node"), client: kerneltest.NewNetns(tb, "sy-us-"+"client")}
	n, c := tp.node, tp.client
	// Forwarded cluster-IP traffic leaves by the interface it came in on;
	// ICMP redirects would then use up the per-host ICMP budget that the
	// REJECT's port-unreachable needs (they share it).
	kerneltest.Run(tb, "ip", "netns", "exec", n, "sysctl", "-q", "-w", "net.ipv4.conf.all.send_redirects=0",
		"net.ipv4.conf.default.send_redirects=0")
	// Many short connections (the benchmarks) must not run out of
	// ephemeral ports to TIME_WAIT, on the client nor on the proxy.
	for _, ns := range []string{n, c} {
		kerneltest.Run(tb, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_tw_reuse=1",
			"net.ipv4.ip_local_port_range=1024 65000")
	}
	kerneltest.Run(tb, "ip", "-n", n, "link", "add", "vc0", "type", "veth", "peer", "name", "vc1", "netns", c)
	kerneltest.Run(tb, "ip", "-n", n, "addr", "add", nsNodeIP+"/24", "dev", "vc0")
	kerneltest.Run(tb, "ip", "-n", n, "link", "set", "vc0", "up")
	kerneltest.Run(tb, "ip", "-n", c, "addr", "add", nsClientIP+"/24", "dev", "vc1")
	kerneltest.Run(tb, "ip", "-n", c, "link", "set", "vc1", "up")
	kerneltest.Run(tb, "ip", "-n", c, "route", "add", "10.96.0.0/16", "via", nsNodeIP)
	kerneltest.Run(tb, "ip", "-n", c, "route", "add", podCIDR, "via", nsNodeIP)
	// A node has a default route: node-originated traffic to a cluster IP
	// needs one before nat OUTPUT rewrites it. Forwarding lets the filter
	// chain refuse cluster IPs without endpoints (and the DNAT baseline of
	// the benchmark work).
	kerneltest.Run(tb, "ip", "-n", n, "route", "add", "default", "via", nsClientIP)
	kerneltest.Run(tb, "ip", "netns", "exec", n, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	kerneltest.Run(tb, "ip", "-n", n, "link", "add", "br0", "type", "bridge")
	kerneltest.Run(tb, "ip", "-n", n, "addr", "add", bridgeIP+"/24", "dev", "br0")
	kerneltest.Run(tb, "ip", "-n", n, "link", "set", "br0", "up")
	for i := range pods {
		tp.addPod(tb, i)
	}
	tp.nodeSockets, tp.clientSocks = netnsSockets(tb, n), netnsSockets(tb, c)
	return tp
}

func (tp *topology) addPod(tb testing.TB, i int) {
	p := kerneltest.NewNetns(tb, "sy-us-"+fmt.Sprintf("pod%d", i))
	host, peer := fmt.Sprintf("vp%d0", i), fmt.Sprintf("vp%d1", i)
	kerneltest.Run(tb, "ip", "-n", tp.node, "link", "add", host, "type", "veth", "peer", "name", peer, "netns", p)
	kerneltest.Run(tb, "ip", "-n", tp.node, "link", "set", host, "master", "br0", "up")
	kerneltest.Run(tb, "ip", "-n", p, "addr", "add", podIP(i).String()+"/24", "dev", peer)
	kerneltest.Run(tb, "ip", "-n", p, "link", "set", peer, "up")
	kerneltest.Run(tb, "ip", "-n", p, "route", "add", "default", "via", bridgeIP)
	tp.pods = append(tp.pods, p)
	tp.podSockets = append(tp.podSockets, netnsSockets(tb, p))
}

// startPodServers runs a TCP and a UDP server named podN on every pod's
// podPort.
func (tp *topology) startPodServers(t *testing.T) {
	t.Helper()
	for i, s := range tp.podSockets {
		name := fmt.Sprintf("pod%d", i)
		ln, err := s.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), podPort))
		if err != nil {
			t.Fatal(err)
		}
		tp.podServers = append(tp.podServers, serveTCP(t, name, ln))
		uc, err := s.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), podPort))
		if err != nil {
			t.Fatal(err)
		}
		serveUDP(t, name, uc)
	}
}

// serverCounts returns how many connections each pod's TCP server
// accepted.
func (tp *topology) serverCounts() []int {
	var out []int
	for _, s := range tp.podServers {
		s.mu.Lock()
		out = append(out, s.n)
		s.mu.Unlock()
	}
	return out
}

// newKernelBackend is the backend of the node namespace: real iptables
// there (mode: runner.ModeNFT, runner.ModeLegacy or "" to detect),
// sockets opened there.
func (tp *topology) newKernelBackend(tb testing.TB, mode string, mod ...func(*Config)) *Backend {
	tb.Helper()
	r, err := runner.New(runner.Options{Netns: tp.node, Mode: mode, WaitSeconds: kernelLockWait})
	if err != nil {
		tb.Fatal(err)
	}
	ns, err := netns.GetFromName(tp.node)
	if err != nil {
		tb.Fatal(err)
	}
	defer ns.Close()
	ct, err := conntrack.NewNetlinkTable(ns)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(ct.Close)
	routing, err := NewNetlinkRouting(ns)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(routing.Close)
	cfg := Config{
		Runner: r, Sockets: tp.nodeSockets, Families: []v1.IPFamily{v1.IPv4Protocol}, Conntrack: ct,
		NodeIPs: []netip.Addr{netip.MustParseAddr(nsNodeIP)}, LocalDetector: proxier.DetectByClusterCIDRs(netip.MustParsePrefix(podCIDR)),
		Routing: routing, Transparent: true,
	}
	for _, m := range mod {
		m(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		b.Close()
		if err := b.Cleanup(context.Background()); err != nil {
			tb.Errorf("Cleanup: %v", err)
		}
	})
	return b
}

// nsRequest connects through s, sends msg, half-closes and returns the
// whole answer.
func nsRequest(s Sockets, addr netip.AddrPort, msg string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.DialTCP(ctx, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	c.CloseWrite()
	out, err := io.ReadAll(c)
	return string(out), err
}

// nsUDPExchange sends msg from a new connected socket (a new client
// address:port, so a new session) and returns the answer.
func nsUDPExchange(s Sockets, addr netip.AddrPort, msg string) (string, error) {
	c, err := s.DialUDP(addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return udpRoundTrip(c, msg)
}

func udpRoundTrip(c *net.UDPConn, msg string) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}
