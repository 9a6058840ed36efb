package userspace

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

var (
	kWeb      = spName("web", v1.ProtocolTCP)
	kDNS      = spName("dns", v1.ProtocolUDP)
	kSticky   = spName("sticky", v1.ProtocolTCP)
	kEmpty    = spName("empty", v1.ProtocolTCP)
	kEmptyUDP = spName("empty-udp", v1.ProtocolUDP)
)

// kernelState: web (TCP) and dns (UDP) with a NodePort each over the
// three pods, sticky with ClientIP affinity, and two services without
// endpoints.
func kernelState(pods ...int) *proxier.State {
	st := newState()
	st.Node.Addresses = []netip.Addr{netip.MustParseAddr(nsNodeIP)}
	var eps []netip.AddrPort
	for _, i := range pods {
		eps = append(eps, podAddr(i))
	}
	addService(st, kWeb, "10.96.0.10", 80, eps...).NodePort = 30080
	addService(st, kDNS, "10.96.0.53", 53, eps...).NodePort = 30053
	addService(st, kSticky, "10.96.0.80", 80, eps...).AffinityTimeoutSeconds = 10800
	addService(st, kEmpty, "10.96.0.60", 80).NodePort = 30060
	addService(st, kEmptyUDP, "10.96.0.61", 53)
	return st
}

func kernelSync(t *testing.T, b *Backend, st *proxier.State) {
	t.Helper()
	if _, err := b.Sync(context.Background(), st, &proxier.Diff{Full: true}); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// path is one way to reach a service: from the client namespace or from
// the node itself, to a cluster IP or a NodePort.
type path struct {
	what string
	via  Sockets
	addr netip.AddrPort
}

func (tp *topology) paths(clusterIP string, port, nodePort uint16) []path {
	cip := netip.AddrPortFrom(netip.MustParseAddr(clusterIP), port)
	np := netip.AddrPortFrom(netip.MustParseAddr(nsNodeIP), nodePort)
	return []path{
		{"client -> cluster IP", tp.clientSocks, cip},
		{"client -> NodePort", tp.clientSocks, np},
		{"node -> cluster IP", tp.nodeSockets, cip},
		{"node -> NodePort", tp.nodeSockets, np},
		{"pod -> cluster IP", tp.podSockets[0], cip},
	}
}

func TestKernelUserspace(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) { kernelUserspace(t, mode) })
	}
}

func kernelUserspace(t *testing.T, mode string) {
	tp := newTopology(t, 3)
	tp.startPodServers(t)
	b := tp.newKernelBackend(t, mode)
	kernelSync(t, b, kernelState(0, 1, 2))
	t.Run("TCP round-robin from client and node", func(t *testing.T) { kernelTCPRoundRobin(t, tp) })
	t.Run("UDP sessions from client and node", func(t *testing.T) { kernelUDPRoundRobin(t, tp) })
	t.Run("affinity", func(t *testing.T) { kernelAffinity(t, tp) })
	t.Run("no endpoints are refused", func(t *testing.T) { kernelRefused(t, tp) })
	t.Run("endpoint removal", func(t *testing.T) { kernelEndpointRemoval(t, tp, b) })
	t.Run("UDP client refused once endpoints go", func(t *testing.T) { kernelUDPRefusedLater(t, tp, b) })
	t.Run("cleanup", func(t *testing.T) { kernelCleanup(t, tp, b, mode) })
}

// roundRobin is the order of pods n new connections or sessions reach.
func roundRobin(n int) []string {
	var out []string
	for i := range n {
		out = append(out, podName(i%3))
	}
	return out
}

// kernelTCPRoundRobin: one balancer per service port, whatever the path:
// two rounds over every path give the pods in exact order.
func kernelTCPRoundRobin(t *testing.T, tp *topology) {
	paths := tp.paths("10.96.0.10", 80, 30080)
	var got []string
	for i := range 2 * len(paths) {
		p := paths[i%len(paths)]
		answer, err := nsRequest(p.via, p.addr, "hi")
		if err != nil {
			t.Fatalf("%s: %v", p.what, err)
		}
		if !strings.HasSuffix(answer, ":hi") {
			t.Errorf("%s: answer %q", p.what, answer)
		}
		got = append(got, from(answer))
	}
	if want := roundRobin(len(got)); !slices.Equal(got, want) {
		t.Errorf("pods in order %v, want %v", got, want)
	}
}

// kernelUDPRoundRobin: every exchange uses a new client socket, so a new
// session; the connected client socket accepts the reply only from the
// address it sent to, so conntrack undid the REDIRECT/DNAT.
func kernelUDPRoundRobin(t *testing.T, tp *topology) {
	paths := tp.paths("10.96.0.53", 53, 30053)
	var got []string
	for i := range 2 * len(paths) {
		p := paths[i%len(paths)]
		answer, err := nsUDPExchange(p.via, p.addr, "q")
		if err != nil {
			t.Fatalf("%s: %v", p.what, err)
		}
		got = append(got, from(answer))
	}
	if want := roundRobin(len(got)); !slices.Equal(got, want) {
		t.Errorf("pods in order %v, want %v", got, want)
	}
	// A session keeps its endpoint.
	c, err := tp.clientSocks.DialUDP(netip.MustParseAddrPort("10.96.0.53:53"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := udpRoundTrip(c, "a")
	for range 3 {
		if again, err2 := udpRoundTrip(c, "b"); err != nil || err2 != nil || from(again) != from(first) {
			t.Fatalf("session moved: %q then %q (%v, %v)", first, again, err, err2)
		}
	}
}

func kernelAffinity(t *testing.T, tp *topology) {
	addr := netip.MustParseAddrPort("10.96.0.80:80")
	for _, via := range []struct {
		what string
		s    Sockets
	}{{"client", tp.clientSocks}, {"node", tp.nodeSockets}} {
		var got []string
		for range 4 {
			answer, err := nsRequest(via.s, addr, "x")
			if err != nil {
				t.Fatalf("%s: %v", via.what, err)
			}
			got = append(got, from(answer))
		}
		if len(slices.Compact(slices.Clone(got))) != 1 {
			t.Errorf("%s with ClientIP affinity reached %v, want one pod", via.what, got)
		}
	}
}

func kernelRefused(t *testing.T, tp *topology) {
	for _, p := range tp.paths("10.96.0.60", 80, 30060) {
		if _, err := nsRequest(p.via, p.addr, "x"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s without endpoints: %v, want connection refused", p.what, err)
		}
	}
	if _, err := nsUDPExchange(tp.clientSocks, netip.MustParseAddrPort("10.96.0.61:53"), "q"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("UDP without endpoints: %v, want connection refused (ICMP port unreachable)", err)
	}
}

// kernelEndpointRemoval: after an endpoint goes, new TCP connections
// avoid it while a connection it already had drains; a UDP session to it
// moves to another pod.
func kernelEndpointRemoval(t *testing.T, tp *topology, b *Backend) {
	addr := netip.MustParseAddrPort("10.96.0.10:80")
	before := tp.serverCounts()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := tp.clientSocks.DialTCP(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	held.Write([]byte("held"))
	gone := -1
	eventually(t, "the held connection to reach a pod", func() bool {
		for i, n := range tp.serverCounts() {
			if n > before[i] {
				gone = i
				return true
			}
		}
		return false
	})
	kernelSync(t, b, kernelState(others(gone)...))
	var got []string
	for range 4 {
		answer, err := nsRequest(tp.clientSocks, addr, "x")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, from(answer))
	}
	if slices.Contains(got, podName(gone)) || got[0] == got[1] || got[0] != got[2] || got[1] != got[3] {
		t.Errorf("after removing %s new connections went to %v, want the two others alternating", podName(gone), got)
	}
	held.CloseWrite()
	held.SetReadDeadline(time.Now().Add(20 * time.Second))
	if answer, err := io.ReadAll(held); err != nil || string(answer) != podName(gone)+":held" {
		t.Errorf("connection from before the removal: %q, %v; want it to drain on %s", answer, err, podName(gone))
	}
	kernelSync(t, b, kernelState(0, 1, 2))
	kernelUDPRemoval(t, tp, b)
}

func kernelUDPRemoval(t *testing.T, tp *topology, b *Backend) {
	uc, err := tp.clientSocks.DialUDP(netip.MustParseAddrPort("10.96.0.53:53"))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	first, err := udpRoundTrip(uc, "a")
	if err != nil {
		t.Fatal(err)
	}
	gone := int(from(first)[len("pod")] - '0')
	kernelSync(t, b, kernelState(others(gone)...))
	if again, err := udpRoundTrip(uc, "b"); err != nil || from(again) == podName(gone) {
		t.Errorf("UDP session after its endpoint went: %q, %v; want another pod", again, err)
	}
	kernelSync(t, b, kernelState(0, 1, 2))
}

// kernelUDPRefusedLater: a UDP client that keeps sending on one socket
// follows its first datagram's conntrack entry; when the service loses
// its endpoints the backend deletes that entry, so the client meets the
// REJECT rule instead of a proxy that can only drop its datagrams.
func kernelUDPRefusedLater(t *testing.T, tp *topology, b *Backend) {
	uc, err := tp.clientSocks.DialUDP(netip.MustParseAddrPort("10.96.0.53:53"))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	if _, err := udpRoundTrip(uc, "a"); err != nil {
		t.Fatal(err)
	}
	kernelSync(t, b, kernelState())
	if answer, err := udpRoundTrip(uc, "b"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after the endpoints went: %q, %v; want connection refused", answer, err)
	}
	kernelSync(t, b, kernelState(0, 1, 2))
	if _, err := udpRoundTrip(uc, "c"); err != nil {
		t.Errorf("after the endpoints came back: %v", err)
	}
}

func others(gone int) []int {
	return slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == gone })
}

func podName(i int) string { return "pod" + strconv.Itoa(i) }

func kernelCleanup(t *testing.T, tp *topology, b *Backend, mode string) {
	if err := b.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Options{Netns: tp.node, Mode: mode, WaitSeconds: kernelLockWait})
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"nat", "filter"} {
		out, err := r.SaveTable(context.Background(), runner.IPv4, table)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "KUBE-") {
			t.Errorf("%s after Cleanup:\n%s", table, out)
		}
	}
	// Without rules nothing answers the cluster IP any more (the SYN is
	// routed away): the dial times out.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if c, err := tp.clientSocks.DialTCP(ctx, netip.MustParseAddrPort("10.96.0.10:80")); err == nil {
		c.Close()
		t.Errorf("the cluster IP still answers after Cleanup")
	}
}
