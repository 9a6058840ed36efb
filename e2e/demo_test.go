//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// TestDemo is what `make demo` runs: a control plane, three pod
// namespaces, one Service, the daemon, 30 requests and the spread over the
// pods, the KUBE-SERVICES listing and a few metrics. It only runs when
// SWITCHYARD_DEMO=1. SWITCHYARD_DEMO_MODE picks the proxy mode;
// SWITCHYARD_DEMO_KEEP=1 leaves everything up until Ctrl-C.
func TestDemo(t *testing.T) {
	if os.Getenv("SWITCHYARD_DEMO") != "1" {
		t.Skip("set SWITCHYARD_DEMO=1 (make demo)")
	}
	mode := os.Getenv("SWITCHYARD_DEMO_MODE")
	if mode == "" {
		mode = "iptables"
	}
	m := startMode(t, mode, 3)
	svc := m.EchoService(t, "demo", m.Topo.Pods...)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(m.Topo.Pods), false)

	fmt.Printf("\n== switchyard %s mode: service %s/demo at %s, 3 pods %v\n", mode, m.Namespace, addr, m.Topo.PodIPs())
	printSpread(t, m, addr)
	// The chain an operator looks at first: kube-proxy's in iptables
	// mode, the old userspace portals chain in userspace mode; in nftables
	// mode its table, after a NodePort request.
	if chain := map[string]string{"iptables": "KUBE-SERVICES", "userspace": "KUBE-PORTALS-CONTAINER"}[mode]; chain != "" {
		fmt.Printf("\n== ip netns exec %s iptables -t nat -L %s -n\n%s", m.Topo.NodeNS, chain,
			nodeIPTables(t, m, "-t", "nat", "-L", chain, "-n"))
	}
	if mode == "nftables" {
		demoNFTables(t, m)
	}
	printMetrics(t, m)
	if os.Getenv("SWITCHYARD_DEMO_KEEP") == "1" {
		keepUp(m, svc.Spec.ClusterIP)
	}
	fmt.Println("\n== tearing down (SWITCHYARD_DEMO_KEEP=1 leaves it up)")
}

// demoNFTables shows a NodePort answering and the table an operator
// reads with nft.
func demoNFTables(t *testing.T, m *modeEnv) {
	svc := framework.NewService(m.Namespace, "demo-np", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc = m.CreateService(t, svc)
	m.CreateEndpointSlice(t, framework.NewEndpointSlice(svc, "1",
		[]discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.EchoPort)},
		framework.PodEndpoints(m.Topo.NodeName, m.Topo.Pods...)...))
	addr := hostPort(m.Topo.NodeIP, svc.Spec.Ports[0].NodePort)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(m.Topo.Pods), false)
	fmt.Printf("\n== NodePort service %s/demo-np at %s (the node's address):\n", m.Namespace, addr)
	printSpread(t, m, addr)
	fmt.Printf("\n== ip netns exec %s nft list table ip kube-proxy\n%s", m.Topo.NodeNS,
		nodeNFT(t, m, "list", "table", "ip", "kube-proxy"))
}

func printSpread(t *testing.T, m *modeEnv, addr string) {
	fmt.Printf("\n== 30 TCP requests from the client namespace %s:\n", m.Topo.ClientNS)
	counts := map[string]int{}
	var order []string
	for i := range 30 {
		r, err := framework.Echo(t.Context(), m.Topo.ClientNS, "tcp", addr)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		counts[r.Name]++
		order = append(order, r.Name)
	}
	fmt.Println("   answered by:", strings.Join(order, " "))
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("   %-5s %2d %s\n", n, counts[n], strings.Repeat("#", counts[n]))
	}
}

func printMetrics(t *testing.T, m *modeEnv) {
	text, err := m.daemon.Metrics(t.Context())
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	fmt.Printf("\n== a few metrics from %s/metrics\n", m.daemon.MetricsAddr)
	for _, l := range strings.Split(text, "\n") {
		for _, p := range []string{"kubeproxy_sync_proxy_rules_duration_seconds_count", "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
			"kubeproxy_network_programming_duration_seconds_count", "kubeproxy_sync_proxy_rules_iptables_total",
			"switchyard_nftables_operations_total"} {
			if strings.HasPrefix(l, p) {
				fmt.Println("  ", l)
			}
		}
	}
}

func keepUp(m *modeEnv, clusterIP string) {
	rules := "iptables -t nat -S"
	if m.mode == "nftables" {
		rules = "nft list table ip kube-proxy"
	}
	fmt.Printf("\n== left up. Try:\n"+
		"   ip netns exec %s bash -c 'exec 3<>/dev/tcp/%s/80; echo hi >&3; head -1 <&3'\n"+
		"   ip netns exec %s "+rules+"\n"+
		"   kubectl --kubeconfig %s get svc,endpointslices -A\n"+
		"Press Ctrl-C to tear everything down.\n",
		m.Topo.ClientNS, clusterIP, m.Topo.NodeNS, suite.Cluster.Kubeconfig)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	<-ch
	signal.Stop(ch)
}
