package nftables_test

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

const thisNode = "node-a"

// Service addresses of the traffic State.
const (
	webIP, localIP, stickyIP, emptyIP, selfIP, swapIP = "10.96.0.10", "10.96.0.20", "10.96.0.30", "10.96.0.40", "10.96.0.50", "10.96.0.60"
	// unprogrammedIP is in the service range but no service has it.
	unprogrammedIP                      = "10.96.0.99"
	webNodePort, localNodePort, emptyNP = "30080", "30020", "30040"
)

func svcPort(name string, proto v1.Protocol, clusterIP string, nodePort uint16) *proxier.ServicePort {
	n := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: name},
		Port: strings.ToLower(string(proto)), Protocol: proto}
	return &proxier.ServicePort{Name: n, Protocol: proto, Port: 80, NodePort: nodePort,
		ClusterIPs: []netip.Addr{netip.MustParseAddr(clusterIP)}}
}

func podEndpoint(i int, node string) proxier.Endpoint {
	return proxier.Endpoint{IP: netip.MustParseAddr(podIP(i)), Port: echoPort, Ready: true, Serving: true,
		NodeName: node, IsLocal: node == thisNode}
}

func podEndpoints(pods ...int) []proxier.Endpoint {
	var eps []proxier.Endpoint
	for _, i := range pods {
		eps = append(eps, podEndpoint(i, thisNode))
	}
	return eps
}

// trafficState, over three pods: web (TCP and UDP, ClusterIP + NodePort)
// on every pod; local (externalTrafficPolicy Local) with pod0 on this node
// and pod1 elsewhere; sticky (ClientIP affinity) on every pod; empty (TCP
// and UDP, ClusterIP + NodePort) without endpoints; self on pod0 only;
// swap on pod0 and pod1.
func trafficState() *proxier.State {
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{}, Node: proxier.NodeInfo{Name: thisNode}}
	add := func(sp *proxier.ServicePort, eps []proxier.Endpoint) {
		st.Services[sp.Name] = sp
		if eps != nil {
			st.Endpoints[sp.Name] = eps
		}
	}
	all := podEndpoints(0, 1, 2)
	add(svcPort("web", v1.ProtocolTCP, webIP, 30080), all)
	add(svcPort("web", v1.ProtocolUDP, webIP, 30080), all)
	local := svcPort("local", v1.ProtocolTCP, localIP, 30020)
	local.ExternalPolicyLocal = true
	add(local, []proxier.Endpoint{podEndpoint(0, thisNode), podEndpoint(1, "node-b")})
	sticky := svcPort("sticky", v1.ProtocolTCP, stickyIP, 0)
	sticky.AffinityTimeoutSeconds = 10800
	add(sticky, all)
	add(svcPort("empty", v1.ProtocolTCP, emptyIP, 30040), nil)
	add(svcPort("empty", v1.ProtocolUDP, emptyIP, 30040), nil)
	add(svcPort("self", v1.ProtocolTCP, selfIP, 0), podEndpoints(0))
	add(svcPort("swap", v1.ProtocolTCP, swapIP, 0), podEndpoints(0, 1))
	return st
}

// timedSync syncs in ns and returns what the backend reports and how long
// it took.
func timedSync(t *testing.T, ns string, b *nftables.Backend, st *proxier.State, d *proxier.Diff) (proxier.SyncResult, time.Duration) {
	t.Helper()
	var res proxier.SyncResult
	start := time.Now()
	err := kerneltest.InNetns(ns, func() (err error) {
		res, err = syncTracked(b, st, d)
		return err
	})
	if err != nil {
		t.Fatalf("sync in %s: %v", ns, err)
	}
	return res, time.Since(start)
}

// TestKernelTraffic syncs into a node namespace through netlink and sends
// real TCP and UDP traffic from an outside client namespace and from pod
// namespaces to echo servers in three pods. The first sync is cut into
// transactions of a few objects, as a big cluster's is.
func TestKernelTraffic(t *testing.T) {
	kerneltest.Require(t)
	defer nftables.SetChunkObjects(4)()
	tp := newTrafficTopo(t, 3)
	b, err := nftables.New(nftables.Config{LocalDetector: proxier.DetectByClusterCIDRs(netip.MustParsePrefix("10.244.0.0/16")), Conn: nftables.NewNetlinkConn()})
	if err != nil {
		t.Fatal(err)
	}
	st := trafficState()
	_, took := timedSync(t, tp.node, b, st, fullDiff())
	t.Logf("first full sync (%d service ports): %v", len(st.Services), took)
	t.Run("cluster IP reaches every endpoint, masqueraded", func(t *testing.T) { checkClusterIP(t, tp) })
	t.Run("spread is even over 1000 connections", func(t *testing.T) { checkEvenSpread(t, tp) })
	t.Run("NodePort reaches every endpoint, masqueraded", func(t *testing.T) {
		for _, network := range []string{"tcp", "udp"} {
			got := spread(t, tp.client, network, net.JoinHostPort(nodeIP, webNodePort), 30, bridgeIP)
			t.Logf("%s NodePort, 30 requests: %v", network, got)
			expectPods(t, got, "pod0", "pod1", "pod2")
		}
	})
	t.Run("eTP=Local keeps the client address, local endpoint only", func(t *testing.T) {
		expectPods(t, spread(t, tp.client, "tcp", net.JoinHostPort(nodeIP, localNodePort), 20, clientIP), "pod0")
		// Its cluster IP is not bound by the external policy.
		expectPods(t, spread(t, tp.client, "tcp", net.JoinHostPort(localIP, "80"), 30, bridgeIP), "pod0", "pod1")
	})
	t.Run("affinity pins each client", func(t *testing.T) { checkAffinity(t, tp) })
	t.Run("hairpin: a pod reaching itself is masqueraded, others are not", func(t *testing.T) { checkHairpin(t, tp) })
	t.Run("no endpoints: refused by the rules", func(t *testing.T) { checkRefused(t, tp) })
	t.Run("partial sync replaces an endpoint", func(t *testing.T) { st = checkPartialReplace(t, tp, b, st) })
	t.Run("periodic sync of an untouched table rewrites nothing", func(t *testing.T) {
		if res, took := timedSync(t, tp.node, b, st, &proxier.Diff{Verify: true}); res.Full {
			t.Errorf("periodic sync of an untouched table was a full sync (%v)", took)
		} else {
			t.Logf("periodic sync, nothing to repair: %v", took)
		}
	})
	t.Run("deleted table repaired by the periodic sync", func(t *testing.T) {
		run(t, "ip", "netns", "exec", tp.node, "nft", "delete", "table", "ip", nftables.TableName)
		checkRepair(t, tp, b, st)
	})
	t.Run("flushed chain repaired by the periodic sync", func(t *testing.T) {
		chain := serviceChain(t, tp, "default.web.tcp.tcp")
		run(t, "ip", "netns", "exec", tp.node, "nft", "flush", "chain", "ip", nftables.TableName, chain)
		checkRepair(t, tp, b, st)
		if out := run(t, "ip", "netns", "exec", tp.node, "nft", "list", "chain", "ip", nftables.TableName, chain); !strings.Contains(out, "dnat") {
			t.Errorf("chain %s after the repair has no dnat rule:\n%s", chain, out)
		}
	})
}

// checkClusterIP: TCP and UDP to the cluster IP reach all three pods, and
// each sees the node's bridge address (traffic from outside the cluster
// CIDR is masqueraded).
func checkClusterIP(t *testing.T, tp *trafficTopo) {
	for _, network := range []string{"tcp", "udp"} {
		got := spread(t, tp.client, network, net.JoinHostPort(webIP, "80"), 60, bridgeIP)
		t.Logf("%s cluster IP, 60 requests: %v", network, got)
		expectPods(t, got, "pod0", "pod1", "pod2")
	}
}

// checkEvenSpread: each pod holds a third of the 65,536 numgen slots
// (21,845 or 21,846). Binomial(n, 1/3) has a standard deviation of 14.9
// at n=1000 and 8.2 at n=300: five of them is 259-408 and 59-141.
func checkEvenSpread(t *testing.T, tp *trafficTopo) {
	for _, c := range []struct {
		network string
		n       int
		lo, hi  int
	}{{"tcp", 1000, 259, 408}, {"udp", 300, 59, 141}} {
		start := time.Now()
		got := spread(t, tp.client, c.network, net.JoinHostPort(webIP, "80"), c.n, bridgeIP)
		took := time.Since(start)
		t.Logf("%s: %d connections in %v (%v each): %v", c.network, c.n, took.Round(time.Millisecond), took/time.Duration(c.n), got)
		for _, pod := range []string{"pod0", "pod1", "pod2"} {
			if got[pod] < c.lo || got[pod] > c.hi {
				t.Errorf("%s: %s got %d of %d, outside %d-%d (5 standard deviations)", c.network, pod, got[pod], c.n, c.lo, c.hi)
			}
		}
	}
}

// checkAffinity: with ClientIP affinity over three endpoints, each client
// (the outside client and every pod) lands on one pod for 10 connections;
// without affinity that happens by chance once in 19,683.
func checkAffinity(t *testing.T, tp *trafficTopo) {
	clients := append([]string{tp.client}, tp.pods...)
	var pins []string
	for _, ns := range clients {
		got := spread(t, ns, "tcp", net.JoinHostPort(stickyIP, "80"), 10, "")
		if len(got) != 1 {
			t.Errorf("10 connections from %s went to %v, want one pod", ns, got)
		}
		pins = append(pins, fmt.Sprintf("%s->%v", ns, got))
	}
	t.Logf("pins: %s", strings.Join(pins, " "))
}

// checkHairpin: a pod reaching itself through a service is masqueraded
// (else it would answer itself from its own address and drop the reply);
// a pod reaching another pod keeps its address.
func checkHairpin(t *testing.T, tp *trafficTopo) {
	expectPods(t, spread(t, tp.pods[0], "tcp", net.JoinHostPort(selfIP, "80"), 3, bridgeIP), "pod0")
	got := map[string]int{}
	for i := 0; i < 30; i++ {
		r, err := request(tp.pods[1], "tcp", net.JoinHostPort(webIP, "80"))
		if err != nil {
			t.Fatal(err)
		}
		pod, peer, _ := strings.Cut(r, " ")
		got[pod]++
		want := podIP(1)
		if pod == "pod1" {
			want = bridgeIP
		}
		if peer != want {
			t.Errorf("pod1 -> %s seen from %s, want %s", pod, peer, want)
		}
	}
	expectPods(t, got, "pod0", "pod1", "pod2")
}

// checkRefused: a service without endpoints refuses at once, TCP with a
// reset and UDP with an ICMP port unreachable, on its cluster IP and its
// NodePort. Each case is built so that only the backend's reject rules
// can produce ECONNREFUSED: the node has no route to an unprogrammed
// service address (a control checks that this is "unreachable", not
// "refused"), and the node itself listens on the NodePort over TCP and
// UDP, as kube-proxy holds NodePorts open, so without the rule the TCP
// connection would be accepted and the UDP datagram swallowed.
func checkRefused(t *testing.T, tp *trafficTopo) {
	listenIn(t, tp.node, "0.0.0.0", 30040)
	listenIn(t, tp.node, "0.0.0.0", 30041)
	if _, err := request(tp.client, "tcp", net.JoinHostPort(unprogrammedIP, "80")); err == nil || isRefused(err) {
		t.Fatalf("control: an unprogrammed service address gave %v, want a non-refusal error", err)
	}
	err := kerneltest.InNetns(tp.client, func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(nodeIP, "30041"), ioTimeout)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("control: the node's own listener on a port that is no NodePort: %v, want accepted", err)
	}
	for _, c := range []struct{ network, addr string }{
		{"tcp", net.JoinHostPort(emptyIP, "80")},
		{"tcp", net.JoinHostPort(nodeIP, emptyNP)},
		{"udp", net.JoinHostPort(emptyIP, "80")},
		{"udp", net.JoinHostPort(nodeIP, emptyNP)},
	} {
		var worst time.Duration
		for i := 0; i < 5; i++ {
			start := time.Now()
			r, err := request(tp.client, c.network, c.addr)
			worst = max(worst, time.Since(start))
			if !isRefused(err) {
				t.Errorf("%s %s without endpoints: answer %q, error %v; want connection refused", c.network, c.addr, r, err)
			}
		}
		t.Logf("%s %s refused 5 times, slowest in %v", c.network, c.addr, worst)
		if worst > 500*time.Millisecond {
			t.Errorf("%s %s: a refusal took %v; a client must fail fast", c.network, c.addr, worst)
		}
	}
}

// checkPartialReplace: swap's endpoint pod1 is replaced by pod2 in a
// partial sync (only swap in Diff.Changed); the next connections reach
// pod0 and pod2 and never pod1.
func checkPartialReplace(t *testing.T, tp *trafficTopo, b *nftables.Backend, st *proxier.State) *proxier.State {
	swap := svcPort("swap", v1.ProtocolTCP, swapIP, 0).Name
	addr := net.JoinHostPort(swapIP, "80")
	expectPods(t, spread(t, tp.client, "tcp", addr, 30, bridgeIP), "pod0", "pod1")
	cur := cloneState(st)
	cur.Endpoints[swap] = podEndpoints(0, 2)
	res, took := timedSync(t, tp.node, b, cur, changedDiff(swap))
	if res.Full {
		t.Errorf("a sync with only swap changed was a full sync")
	}
	got := spread(t, tp.client, "tcp", addr, 30, bridgeIP)
	t.Logf("partial sync in %v; then 30 connections: %v", took, got)
	expectPods(t, got, "pod0", "pod2")
	// The other services were not disturbed.
	expectPods(t, spread(t, tp.client, "tcp", net.JoinHostPort(webIP, "80"), 30, bridgeIP), "pod0", "pod1", "pod2")
	return cur
}

// checkRepair: after the tampering the caller did, the web service no
// longer answers; a periodic sync (Diff.Verify) notices, rewrites
// everything, and the web service answers from all pods again.
func checkRepair(t *testing.T, tp *trafficTopo, b *nftables.Backend, st *proxier.State) {
	t.Helper()
	addr := net.JoinHostPort(webIP, "80")
	if r, err := request(tp.client, "tcp", addr); err == nil {
		t.Fatalf("web still answered (%q) after the tampering", r)
	}
	res, took := timedSync(t, tp.node, b, st, &proxier.Diff{Verify: true})
	if !res.Full {
		t.Errorf("the periodic sync after the tampering was not a full sync")
	}
	got := spread(t, tp.client, "tcp", addr, 30, bridgeIP)
	t.Logf("periodic sync repaired it in %v; then 30 connections: %v", took, got)
	expectPods(t, got, "pod0", "pod1", "pod2")
}

// serviceChain finds the name of a service port's chain
// ("service-<hash>-default.web.tcp.tcp") in what nft lists.
func serviceChain(t *testing.T, tp *trafficTopo, port string) string {
	t.Helper()
	out := run(t, "ip", "netns", "exec", tp.node, "nft", "list", "table", "ip", nftables.TableName)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "chain" && strings.HasPrefix(f[1], "service-") && strings.HasSuffix(f[1], "-"+port) {
			return f[1]
		}
	}
	t.Fatalf("no chain for %s in:\n%s", port, out)
	return ""
}
