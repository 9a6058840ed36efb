package userspace

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// peerPort is where the pods' peer servers listen: they answer with the
// address the connection came from.
const peerPort = 8081

var kPeer = spName("peer", v1.ProtocolTCP)

// TestKernelUserspaceFallback: while no backend holds the sentinels (the
// daemon was killed, or is starting), new connections from outside the
// node are DNATed by the kernel straight to the endpoints: nothing is
// refused. A new backend takes over again once it has synced.
func TestKernelUserspaceFallback(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) { kernelFallback(t, mode) })
	}
}

func kernelFallback(t *testing.T, mode string) {
	tp := newTopology(t, 4) // pod3 is a client only (the bridge has no hairpin)
	tp.startPodServers(t)
	fallback := func(c *Config) { c.RestartFallback = true }
	b := tp.newKernelBackend(t, mode, fallback)
	st := kernelState(0, 1, 2)
	kernelSync(t, b, st)
	cip := netip.MustParseAddrPort("10.96.0.10:80")
	np := netip.AddrPortFrom(netip.MustParseAddr(nsNodeIP), 30080)
	before := sum(tp.serverCounts())
	b.Close() // as SIGKILL would: sockets gone, rules stay
	for _, p := range []path{{"client -> cluster IP", tp.clientSocks, cip}, {"client -> NodePort", tp.clientSocks, np},
		{"pod -> cluster IP", tp.podSockets[3], cip}} {
		for range 3 {
			if answer, err := nsRequest(p.via, p.addr, "hi"); err != nil || from(answer) == "" {
				t.Errorf("%s without a proxy: %q, %v", p.what, answer, err)
			}
		}
	}
	if _, err := nsUDPExchange(tp.clientSocks, netip.MustParseAddrPort("10.96.0.53:53"), "q"); err != nil {
		t.Errorf("UDP cluster IP without a proxy: %v", err)
	}
	if got := sum(tp.serverCounts()) - before; got != 9 {
		t.Errorf("pods accepted %d connections, want 9", got)
	}
	b2 := tp.newKernelBackend(t, mode)
	kernelSync(t, b2, st)
	for range 3 {
		if answer, err := nsRequest(tp.clientSocks, cip, "hi"); err != nil || from(answer) == "" {
			t.Errorf("after the restart: %q, %v", answer, err)
		}
	}
	var m dto.Metric
	if err := b2.metrics.bytes.WithLabelValues(kWeb.String(), DirectionToEndpoint).Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got < 6 {
		t.Errorf("the new backend relayed %v bytes, want 6: traffic still takes the fallback", got)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestKernelUserspaceTransparent: with externalTrafficPolicy Local, a
// client outside the node reaching the NodePort is seen by the (local)
// endpoint with its own address; pods and the node, and services with
// policy Cluster, are seen as the node, as before.
func TestKernelUserspaceTransparent(t *testing.T) {
	kerneltest.Require(t)
	tp := newTopology(t, 2)
	tp.startPeerServers(t)
	b := tp.newKernelBackend(t, runner.ModeNFT)
	st := newState()
	st.Node.Addresses = []netip.Addr{netip.MustParseAddr(nsNodeIP)}
	local := addService(st, kPeer, "10.96.0.90", 80, netip.AddrPortFrom(podIP(0), peerPort))
	local.NodePort = 30090
	local.ExternalPolicyLocal = true
	cluster := addService(st, spName("peer-cluster", v1.ProtocolTCP), "10.96.0.91", 80, netip.AddrPortFrom(podIP(0), peerPort))
	cluster.NodePort = 30091
	kernelSync(t, b, st)
	node := netip.MustParseAddr(nsNodeIP)
	fromNode := netip.MustParseAddr(bridgeIP) // the proxy's own connections to pods
	for _, c := range []struct {
		what string
		via  Sockets
		addr netip.AddrPort
		want netip.Addr
	}{
		{"client -> eTP=Local NodePort", tp.clientSocks, netip.AddrPortFrom(node, 30090), netip.MustParseAddr(nsClientIP)},
		{"client -> eTP=Local cluster IP", tp.clientSocks, netip.MustParseAddrPort("10.96.0.90:80"), fromNode},
		{"pod -> eTP=Local NodePort", tp.podSockets[1], netip.AddrPortFrom(node, 30090), netip.MustParseAddr(bridgeIP)},
		{"node -> eTP=Local NodePort", tp.nodeSockets, netip.AddrPortFrom(node, 30090), fromNode},
		{"client -> eTP=Cluster NodePort", tp.clientSocks, netip.AddrPortFrom(node, 30091), fromNode},
	} {
		for range 3 {
			answer, err := nsRequest(c.via, c.addr, "")
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
				continue
			}
			src, err := netip.ParseAddrPort(strings.TrimSpace(answer))
			if err != nil || src.Addr() != c.want {
				t.Errorf("%s: endpoint saw %q, want %s", c.what, answer, c.want)
			}
		}
	}
}

// startPeerServers runs, in every pod, a server on peerPort that answers
// with the connection's source address.
func (tp *topology) startPeerServers(t *testing.T) {
	t.Helper()
	for _, s := range tp.podSockets {
		ln, err := s.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), peerPort))
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
				fmt.Fprintf(c, "%s\n", c.RemoteAddr())
				c.Close()
			}
		}()
	}
}

// TestKernelServicePortsFreeOnNode: by default a host process can bind a
// Service's port on every address of the node (a hostNetwork pod's
// server on :80 while a Service has port 80); the sentinels of
// RestartFallback hold the port, and the bind fails. Upstream's "DNS
// HostNetwork ... ClusterFirstWithHostNet" spec failed on it.
func TestKernelServicePortsFreeOnNode(t *testing.T) {
	kerneltest.Require(t)
	tp := newTopology(t, 1)
	for _, fallback := range []bool{false, true} {
		b := tp.newKernelBackend(t, runner.ModeNFT, func(c *Config) { c.RestartFallback = fallback })
		kernelSync(t, b, kernelState(0))
		ln, err := tp.nodeSockets.ListenTCP(netip.MustParseAddrPort("0.0.0.0:80"))
		switch {
		case !fallback && err != nil:
			t.Errorf("without the restart fallback, binding :80 on the node: %v", err)
		case fallback && err == nil:
			t.Errorf("with the restart fallback, binding :80 succeeded: the sentinel no longer holds it, update the docs")
		}
		if ln != nil {
			ln.Close()
		}
		b.Close()
	}
}
