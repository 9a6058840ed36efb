package userspace

import (
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// bindFromOtherProcess tries, from a separate process in namespace ns, to
// bind proto addr with SO_REUSEADDR set (the most permissive an ordinary
// server asks for). It returns "" on success or the error it got.
func bindFromOtherProcess(t *testing.T, ns string, proto v1.Protocol, addr netip.AddrPort) string {
	t.Helper()
	typ := "SOCK_STREAM"
	if proto == v1.ProtocolUDP {
		typ = "SOCK_DGRAM"
	}
	script := "import socket,sys\n" +
		"s=socket.socket(socket.AF_INET,socket." + typ + ")\n" +
		"s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n" +
		"try:\n s.bind(('" + addr.Addr().String() + "'," + strconv.Itoa(int(addr.Port())) + "))\n" +
		"except OSError as e:\n print(e.strerror); sys.exit(0)\n" +
		"print('')\n"
	out, err := exec.Command("ip", "netns", "exec", ns, "/usr/bin/python3", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("bind helper: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestKernelNodePortReservation: with HostPortReserver semantics in the
// node namespace, another process cannot bind a NodePort (wildcard or a
// node address, TCP and UDP) while the service exists, NodePort traffic
// still reaches the proxy, a port taken before the sync is skipped and
// counted without failing the sync, and deleting the service frees the
// port.
func TestKernelNodePortReservation(t *testing.T) {
	kerneltest.Require(t)
	tp := newTopology(t, 1)
	tp.startPodServers(t)
	taken, err := tp.nodeSockets.ListenTCP(netip.MustParseAddrPort("0.0.0.0:30060"))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	reg := prometheus.NewRegistry()
	b := tp.newKernelBackend(t, "", func(c *Config) { c.PortReserver, c.Registerer = tp.nodeSockets, reg })
	st := kernelState(0) // web TCP 30080, dns UDP 30053, empty TCP 30060
	kernelSync(t, b, st)

	for _, tc := range []struct {
		proto v1.Protocol
		addr  string
	}{
		{v1.ProtocolTCP, "0.0.0.0:30080"}, {v1.ProtocolTCP, nsNodeIP + ":30080"},
		{v1.ProtocolUDP, "0.0.0.0:30053"}, {v1.ProtocolUDP, nsNodeIP + ":30053"},
	} {
		if got := bindFromOtherProcess(t, tp.node, tc.proto, netip.MustParseAddrPort(tc.addr)); got != syscall.EADDRINUSE.Error() &&
			!strings.Contains(strings.ToLower(got), "address already in use") {
			t.Errorf("another process binding %s %s: %q, want address already in use", tc.proto, tc.addr, got)
		}
	}
	np := netip.AddrPortFrom(netip.MustParseAddr(nsNodeIP), 30080)
	if got, err := nsRequest(tp.clientSocks, np, "hi"); err != nil || got != "pod0:hi" {
		t.Errorf("client -> NodePort through the held port: %q, %v", got, err)
	}
	if got, err := nsRequest(tp.nodeSockets, np, "hi"); err != nil || got != "pod0:hi" {
		t.Errorf("node -> NodePort through the held port: %q, %v", got, err)
	}
	if v, _ := metricValue(t, reg, "switchyard_userspace_nodeports_unreserved", "protocol", "TCP"); v != 1 {
		t.Errorf("nodeports_unreserved{TCP} = %v with 30060 taken, want 1", v)
	}

	delete(st.Services, kWeb)
	kernelSync(t, b, st)
	if got := bindFromOtherProcess(t, tp.node, v1.ProtocolTCP, netip.MustParseAddrPort("0.0.0.0:30080")); got != "" {
		t.Errorf("after the service was deleted, binding its NodePort: %q, want success", got)
	}
}

// TestKernelNodePortAddresses: with --nodeport-addresses naming one of
// the node's two addresses, NodePorts answer on that one only (the other
// refuses: no rule, and its port is not held) and only that address's
// port is reserved.
func TestKernelNodePortAddresses(t *testing.T) {
	kerneltest.Require(t)
	tp := newTopology(t, 1)
	const other = "192.168.0.11"
	kerneltest.Run(t, "ip", "-n", tp.node, "addr", "add", other+"/24", "dev", "vc0")
	tp.startPodServers(t)
	b := tp.newKernelBackend(t, "", func(c *Config) {
		c.PortReserver = tp.nodeSockets
		c.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix(nsNodeIP + "/32")}
	})
	kernelSync(t, b, kernelState(0))

	served := netip.AddrPortFrom(netip.MustParseAddr(nsNodeIP), 30080)
	notServed := netip.AddrPortFrom(netip.MustParseAddr(other), 30080)
	if got, err := nsRequest(tp.clientSocks, served, "hi"); err != nil || got != "pod0:hi" {
		t.Errorf("client -> %s: %q, %v", served, got, err)
	}
	if got, err := nsRequest(tp.clientSocks, notServed, "hi"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("client -> %s (outside --nodeport-addresses): %q, %v; want connection refused", notServed, got, err)
	}
	if got, err := nsUDPExchange(tp.clientSocks, netip.AddrPortFrom(netip.MustParseAddr(nsNodeIP), 30053), "q"); err != nil || got != "pod0:q" {
		t.Errorf("client -> UDP NodePort on %s: %q, %v", nsNodeIP, got, err)
	}
	// Cluster IPs are not affected.
	if got, err := nsRequest(tp.clientSocks, netip.MustParseAddrPort("10.96.0.10:80"), "hi"); err != nil || got != "pod0:hi" {
		t.Errorf("client -> cluster IP: %q, %v", got, err)
	}
	if got := bindFromOtherProcess(t, tp.node, v1.ProtocolTCP, served); !strings.Contains(strings.ToLower(got), "in use") {
		t.Errorf("binding %s: %q, want address already in use", served, got)
	}
	if got := bindFromOtherProcess(t, tp.node, v1.ProtocolTCP, notServed); got != "" {
		t.Errorf("binding %s (not a NodePort address): %q, want success", notServed, got)
	}
}
