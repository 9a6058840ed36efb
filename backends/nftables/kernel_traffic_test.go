package nftables_test

import (
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

func port(name string, clusterIP string, nodePort uint16) *proxier.ServicePort {
	n := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}, Port: "http", Protocol: v1.ProtocolTCP}
	return &proxier.ServicePort{Name: n, Protocol: v1.ProtocolTCP, Port: 80, NodePort: nodePort,
		ClusterIPs: []netip.Addr{netip.MustParseAddr(clusterIP)}}
}

func podEndpoint(i int, node string) proxier.Endpoint {
	return proxier.Endpoint{IP: netip.MustParseAddr(podIP(i)), Port: echoPort, Ready: true, Serving: true,
		NodeName: node, IsLocal: node == thisNode}
}

// trafficState: web (ClusterIP + NodePort) on both pods; local
// (externalTrafficPolicy Local) with pod0 on this node and pod1 elsewhere;
// sticky (ClientIP affinity) on both; empty without endpoints; self on
// pod0 only.
func trafficState() *proxier.State {
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{}, Node: proxier.NodeInfo{Name: thisNode}}
	both := []proxier.Endpoint{podEndpoint(0, thisNode), podEndpoint(1, thisNode)}
	web := port("web", "10.96.0.10", 30080)
	local := port("local", "10.96.0.20", 30020)
	local.ExternalPolicyLocal = true
	sticky := port("sticky", "10.96.0.30", 0)
	sticky.AffinityTimeoutSeconds = 10800
	empty := port("empty", "10.96.0.40", 30040)
	self := port("self", "10.96.0.50", 0)
	for _, sp := range []*proxier.ServicePort{web, local, sticky, empty, self} {
		st.Services[sp.Name] = sp
	}
	st.Endpoints[self.Name] = []proxier.Endpoint{podEndpoint(0, thisNode)}
	st.Endpoints[web.Name], st.Endpoints[sticky.Name] = both, both
	st.Endpoints[local.Name] = []proxier.Endpoint{podEndpoint(0, thisNode), podEndpoint(1, "node-b")}
	return st
}

// TestKernelTraffic syncs into a node namespace through netlink and sends
// real TCP connections from an outside client namespace to echo servers
// in two pod namespaces.
func TestKernelTraffic(t *testing.T) {
	kerneltest.Require(t)
	tp := newTrafficTopo(t, 2)
	b, err := nftables.New(nftables.Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, Conn: nftables.NewNetlinkConn()})
	if err != nil {
		t.Fatal(err)
	}
	st := trafficState()
	kernelSync(t, tp.node, b, st, fullDiff())
	both := map[string]bool{"pod0": true, "pod1": true}
	t.Run("cluster IP spreads, masqueraded", func(t *testing.T) {
		got := spread(t, tp.client, "10.96.0.10:80", 40, bridgeIP)
		t.Logf("40 connections: %v", got)
		expectPods(t, got, both)
	})
	t.Run("spread is even over 1000 connections", func(t *testing.T) {
		// Each pod holds 32,768 of the 65,536 slots. Binomial(1000, 1/2)
		// has a standard deviation of 15.8: 5 of them is 421-579.
		got := spread(t, tp.client, "10.96.0.10:80", 1000, bridgeIP)
		t.Logf("1000 connections: %v", got)
		for _, pod := range []string{"pod0", "pod1"} {
			if n := got[pod]; n < 421 || n > 579 {
				t.Errorf("%s got %d of 1000 connections, outside 421-579 (5 standard deviations)", pod, n)
			}
		}
	})
	t.Run("NodePort reaches every endpoint, masqueraded", func(t *testing.T) {
		expectPods(t, spread(t, tp.client, net.JoinHostPort(nodeIP, "30080"), 20, bridgeIP), both)
	})
	t.Run("eTP=Local keeps the client address, local endpoint only", func(t *testing.T) {
		expectPods(t, spread(t, tp.client, net.JoinHostPort(nodeIP, "30020"), 10, clientIP), map[string]bool{"pod0": true})
	})
	t.Run("affinity pins the client", func(t *testing.T) {
		if got := spread(t, tp.client, "10.96.0.30:80", 10, bridgeIP); len(got) != 1 {
			t.Errorf("10 connections of one client went to %v, want one pod", got)
		}
	})
	t.Run("hairpin: a pod reaching itself is masqueraded, others are not", func(t *testing.T) {
		expectPods(t, spread(t, tp.pods[0], "10.96.0.50:80", 3, bridgeIP), map[string]bool{"pod0": true})
		got := map[string]int{}
		for i := 0; i < 20; i++ {
			r, err := request(tp.pods[1], "10.96.0.10:80")
			if err != nil {
				t.Fatal(err)
			}
			pod, peer, _ := strings.Cut(r, " ")
			got[pod]++
			if want := map[string]string{"pod0": podIP(1), "pod1": bridgeIP}[pod]; peer != want {
				t.Errorf("pod1 -> %s seen from %s, want %s", pod, peer, want)
			}
		}
		expectPods(t, got, both)
	})
	t.Run("no endpoints: refused at once", func(t *testing.T) {
		for _, addr := range []string{"10.96.0.40:80", net.JoinHostPort(nodeIP, "30040")} {
			start := time.Now()
			_, err := request(tp.client, addr)
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("%s: %v, want connection refused", addr, err)
			}
			t.Logf("%s refused in %v", addr, time.Since(start))
		}
	})
	t.Run("partial sync replaces an endpoint", func(t *testing.T) {
		cur := cloneState(st)
		web := port("web", "10.96.0.10", 30080).Name
		cur.Endpoints[web] = []proxier.Endpoint{podEndpoint(1, thisNode)}
		kernelSync(t, tp.node, b, cur, changedDiff(web))
		expectPods(t, spread(t, tp.client, "10.96.0.10:80", 10, bridgeIP), map[string]bool{"pod1": true})
		st = cur
	})
	t.Run("deleted table repaired by the periodic sync", func(t *testing.T) {
		run(t, "ip", "netns", "exec", tp.node, "nft", "delete", "table", "ip", nftables.TableName)
		if _, err := request(tp.client, "10.96.0.10:80"); err == nil {
			t.Fatalf("service still answered with the table deleted")
		}
		kernelSync(t, tp.node, b, st, &proxier.Diff{Verify: true})
		expectPods(t, spread(t, tp.client, "10.96.0.10:80", 5, bridgeIP), map[string]bool{"pod1": true})
	})
}

func expectPods(t *testing.T, got map[string]int, want map[string]bool) {
	t.Helper()
	for pod := range got {
		if !want[pod] {
			t.Errorf("answers %v: %s must not be reached", got, pod)
		}
	}
	for pod := range want {
		if got[pod] == 0 {
			t.Errorf("answers %v: %s never reached", got, pod)
		}
	}
}
