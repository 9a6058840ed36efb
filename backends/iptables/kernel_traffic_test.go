package iptables

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestKernelTraffic syncs a State into a "node" namespace with the real
// backend and sends real TCP and UDP traffic from a "client" namespace to
// echo servers in three "pod" namespaces, for both iptables backends.
func TestKernelTraffic(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range kernelModes() {
		t.Run(mode, func(t *testing.T) {
			tp := newTopology(t, 3)
			cfg := Config{Families: []v1.IPFamily{v1.IPv4Protocol}, LocalDetector: proxier.DetectByClusterCIDRs(mustPrefixes("10.244.0.0/16")...)}
			be := newKernelBackend(t, cfg, mode, tp.node)
			if _, err := be.Sync(context.Background(), trafficState(tp), fullDiff()); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			t.Run("reaches every service address", func(t *testing.T) { checkReachable(t, tp) })
			t.Run("spreads new connections", func(t *testing.T) { checkSpread(t, tp) })
			t.Run("affinity pins the client", func(t *testing.T) { checkAffinity(t, tp) })
			t.Run("no endpoints refuses", func(t *testing.T) { checkRefused(t, tp, mode) })
			t.Run("iptables -L reads like kube-proxy", func(t *testing.T) { checkListing(t, tp, mode) })
		})
	}
}

// Service addresses of the traffic State.
const (
	webIP, stickyIP, emptyIP   = "10.96.0.10", "10.96.0.11", "10.96.0.12"
	webNodePort, emptyNodePort = 30080, 30082
)

// trafficState: web (TCP and UDP, ClusterIP + NodePort) and sticky
// (ClientIP affinity) are served by every pod; empty has no endpoints.
func trafficState(tp *testTopology) *proxier.State {
	var eps []proxier.Endpoint
	for _, p := range tp.pods {
		eps = append(eps, ep(fmt.Sprintf("%s:%d", p.ip, echoPort)))
	}
	web := with(svc("default", "web", "http", v1.ProtocolTCP, 80, webIP), nodePort(webNodePort))
	webUDP := with(svc("default", "web", "udp", v1.ProtocolUDP, 80, webIP), nodePort(webNodePort))
	sticky := with(svc("default", "sticky", "http", v1.ProtocolTCP, 80, stickyIP), affinity(10800))
	empty := with(svc("default", "empty", "http", v1.ProtocolTCP, 80, emptyIP), nodePort(emptyNodePort))
	return stateOf([]string{topoNodeIP}, []*proxier.ServicePort{web, webUDP, sticky, empty},
		epMap{web.Name: eps, webUDP.Name: eps, sticky.Name: eps})
}

// replyPods splits "<pod> <peer>" replies, checking that every pod name is
// known and that the pod saw the node's bridge address: traffic from
// outside the cluster CIDR to a service is masqueraded.
func replyPods(t *testing.T, tp *testTopology, replies []string) map[string]int {
	t.Helper()
	count := map[string]int{}
	for _, r := range replies {
		name, peer, _ := strings.Cut(r, " ")
		if !tp.hasPod(name) || peer != topoBridgeIP {
			t.Errorf("reply %q: want \"<pod> %s\"", r, topoBridgeIP)
		}
		count[name]++
	}
	return count
}

func (tp *testTopology) hasPod(name string) bool {
	for _, p := range tp.pods {
		if p.name == name {
			return true
		}
	}
	return false
}

func checkReachable(t *testing.T, tp *testTopology) {
	for _, tc := range []struct{ network, addr string }{
		{"tcp", net.JoinHostPort(webIP, "80")},
		{"udp", net.JoinHostPort(webIP, "80")},
		{"tcp", net.JoinHostPort(topoNodeIP, fmt.Sprint(webNodePort))},
		{"udp", net.JoinHostPort(topoNodeIP, fmt.Sprint(webNodePort))},
	} {
		replies, err := tp.fromClient(tc.network, tc.addr, 3)
		if err != nil {
			t.Errorf("%s to %s: %v", tc.network, tc.addr, err)
			continue
		}
		replyPods(t, tp, replies)
	}
}

// checkSpread: kube-proxy's statistic rules pick each of 3 endpoints with
// probability 1/3; over 300 new connections each gets 20%..47% (a failure
// of this wide band is ~1e-6 likely with a uniform pick).
func checkSpread(t *testing.T, tp *testTopology) {
	const n = 300
	replies, err := tp.fromClient("tcp", net.JoinHostPort(webIP, "80"), n)
	if err != nil {
		t.Fatal(err)
	}
	count := replyPods(t, tp, replies)
	for _, p := range tp.pods {
		if c := count[p.name]; c < n*20/100 || c > n*47/100 {
			t.Errorf("%s got %d of %d connections, want 20%%..47%% (all: %v)", p.name, c, n, count)
		}
	}
}

func checkAffinity(t *testing.T, tp *testTopology) {
	replies, err := tp.fromClient("tcp", net.JoinHostPort(stickyIP, "80"), 30)
	if err != nil {
		t.Fatal(err)
	}
	if count := replyPods(t, tp, replies); len(count) != 1 {
		t.Errorf("ClientIP affinity spread one client over %v, want one pod", count)
	}
}

// checkRefused: with no endpoints the ClusterIP (filter FORWARD ->
// KUBE-SERVICES) and the NodePort (filter INPUT -> KUBE-EXTERNAL-SERVICES)
// REJECT, so connect fails at once with ECONNREFUSED, not a timeout. The
// REJECT rules' packet counters prove the refusals came from them (a
// NodePort nobody listens on would be refused anyway).
func checkRefused(t *testing.T, tp *testTopology, mode string) {
	const attempts = 3
	for _, addr := range []string{net.JoinHostPort(emptyIP, "80"), net.JoinHostPort(topoNodeIP, fmt.Sprint(emptyNodePort))} {
		for range attempts {
			if err := tp.connectFromClient(context.Background(), addr); !isRefused(err) {
				t.Errorf("connect to %s (no endpoints) = %v, want connection refused", addr, err)
			}
		}
	}
	for _, chain := range []string{chainServices, chainExternalServices} {
		if n := rejectPackets(t, tp.node, mode, chain); n < attempts {
			t.Errorf("filter %s: REJECT rules counted %d packets, want >= %d", chain, n, attempts)
		}
	}
}

// rejectPackets sums the packet counters of the "has no endpoints" REJECT
// rules of a filter chain.
func rejectPackets(t *testing.T, ns, mode, chain string) int {
	out := nsRun(t, ns, iptablesBin(mode, "ipv4", "-save"), "-c", "-t", "filter")
	total := 0
	for _, line := range strings.Split(out, "\n") {
		var pkts, bytes int
		rest, ok := strings.CutPrefix(line, "[")
		if !ok || !strings.Contains(line, "-A "+chain+" ") || !strings.Contains(line, "has no endpoints") {
			continue
		}
		if _, err := fmt.Sscanf(rest, "%d:%d]", &pkts, &bytes); err != nil {
			t.Fatalf("counters of %q: %v", line, err)
		}
		total += pkts
	}
	return total
}

func checkListing(t *testing.T, tp *testTopology, mode string) {
	out := nsRun(t, tp.node, iptablesBin(mode, "ipv4", ""), "-w", "-t", "nat", "-L", chainServices, "-n")
	for _, want := range []string{"/* default/web:http cluster IP */", "/* default/web:udp cluster IP */",
		"/* default/sticky:http cluster IP */"} {
		if !strings.Contains(out, want) {
			t.Errorf("iptables -t nat -L KUBE-SERVICES lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, chainNodePorts+" ") || !strings.Contains(last, "ADDRTYPE match dst-type LOCAL") {
		t.Errorf("last rule of KUBE-SERVICES is %q, want the KUBE-NODEPORTS jump with ADDRTYPE match dst-type LOCAL:\n%s", last, out)
	}
}
