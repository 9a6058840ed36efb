//go:build e2e

package e2e

import (
	"context"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// converge bounds how long the daemon may take to program a change.
const converge = 20 * time.Second

// modeEnv is one daemon in one topology, shared by the subtests of a mode.
type modeEnv struct {
	*framework.Env
	mode   string
	daemon *framework.Daemon
}

func startMode(t *testing.T, mode string, pods int, args ...string) *modeEnv {
	t.Helper()
	env := framework.Setup(t, suite, framework.TopologySpec{Pods: pods})
	d := env.StartDaemon(t, append([]string{"--proxy-mode=" + mode}, args...)...)
	if err := d.WaitHealthy(converge); err != nil {
		t.Fatalf("%s daemon not healthy: %v\n%s", mode, err, d.LogTail(40))
	}
	return &modeEnv{Env: env, mode: mode, daemon: d}
}

// TestDataplane runs the same traffic table against each proxy mode that
// can run on this host's kernel (ipvs runs in the VM: hack/vm/e2e-ipvs.sh
// sets SWITCHYARD_E2E_MODES=ipvs there).
func TestDataplane(t *testing.T) {
	for _, mode := range e2eModes() {
		t.Run(mode, func(t *testing.T) { runDataplaneTable(t, mode) })
	}
}

func runDataplaneTable(t *testing.T, mode string) {
	m := startMode(t, mode, 3)
	cases := []struct {
		name string
		fn   func(t *testing.T, m *modeEnv)
	}{
		{"clusterIP spreads over all endpoints", testClusterIPSpread},
		{"nodePort reaches endpoints", testNodePort},
		{"externalIP and loadBalancer IP", testExternalAndLB},
		{"session affinity pins a client", testAffinity},
		{"removed endpoint gets no traffic", testEndpointRemoval},
		{"no endpoints refuses quickly", testNoEndpoints},
		{"headless, ExternalName and other proxies get nothing", testIgnoredServices},
		{"externalTrafficPolicy Local", testExternalLocal},
		{"network programming latency", testProgrammingLatency},
		{"a Service and its EndpointSlice in one sync", testServiceAndSliceOneSync},
		{"conntrack TCP timeouts set at start", testConntrackTimeouts},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, m) })
	}
	switch mode {
	case "iptables", "nftables":
		t.Run("localhost NodePort", func(t *testing.T) { testLocalhostNodePort(t, m) })
	}
	switch mode {
	case "iptables":
		t.Run("KUBE-SERVICES listing", func(t *testing.T) { testKubeServicesListing(t, m) })
	case "ipvs":
		t.Run("ipvsadm listing", func(t *testing.T) { testIPVSListing(t, m) })
	case "nftables":
		t.Run("nft list table", func(t *testing.T) { testNFTListing(t, m) })
	case "userspace":
		t.Run("eTP=Local source with local and remote endpoints", func(t *testing.T) { testUserspaceSourceLocalRemote(t, m) })
	}
	t.Run("prometheus scrapes sync metrics", func(t *testing.T) { testPrometheus(t, m) })
	t.Run("--cleanup removes everything", func(t *testing.T) { testCleanup(t, m) })
}

// testCleanup stops the daemon (the rules stay, so traffic keeps flowing),
// then runs `switchyard --cleanup`, which must leave no KUBE- chain.
func testCleanup(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "cleanup", m.Topo.Pods...)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(m.Topo.Pods), false)
	if err := m.daemon.Stop(); err != nil {
		t.Fatalf("stopping the daemon: %v", err)
	}
	if m.mode != "userspace" { // the userspace proxy's sockets close with it
		if _, err := framework.Echo(t.Context(), m.Topo.ClientNS, "tcp", addr); err != nil {
			t.Errorf("traffic stopped with the daemon: %v (the dataplane must stay)", err)
		}
	}
	bin, err := suite.DaemonBinary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if m.mode == "nftables" {
		addForeignNFTTable(t, m)
	}
	if out, err := framework.RunIn(t.Context(), m.Topo.NodeNS, bin, "--cleanup"); err != nil {
		t.Fatalf("switchyard --cleanup: %v\n%s", err, out)
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		if out := withoutKubeletFirewall(nodeCommand(t, m, save)); strings.Contains(out, "KUBE-") {
			t.Errorf("%s after --cleanup still has KUBE- chains:\n%s", save, out)
		}
	}
	if m.mode == "ipvs" {
		checkIPVSCleanedUp(t, m)
	}
	if m.mode == "userspace" { // its policy routing for transparent sockets
		if out := nodeCommand(t, m, "ip", "rule", "show"); strings.Contains(out, "lookup 2510") {
			t.Errorf("ip rule after --cleanup still has the userspace rule:\n%s", out)
		}
		if out := nodeCommand(t, m, "ip", "route", "show", "table", "2510"); strings.TrimSpace(out) != "" {
			t.Errorf("routing table 2510 after --cleanup:\n%s", out)
		}
	}
	if m.mode == "nftables" {
		checkNFTCleanedUp(t, m)
	}
}

// modesEnv overrides the proxy modes TestDataplane runs (space or comma
// separated); by default the modes this host's kernel supports.
const modesEnv = "SWITCHYARD_E2E_MODES"

func e2eModes() []string {
	if v := os.Getenv(modesEnv); v != "" {
		return strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
	}
	return []string{"iptables", "nftables", "userspace"}
}

func podNames(pods []framework.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func hostPort(ip string, port int32) string { return net.JoinHostPort(ip, strconv.Itoa(int(port))) }

// waitServed polls until n requests to addr are answered only by servers in
// want (and by all of them when all is set).
func waitServed(t *testing.T, ns, proto, addr string, want []string, all bool) map[string]int {
	t.Helper()
	var counts map[string]int
	err := framework.WaitFor(converge, func() (bool, error) {
		var err error
		counts, err = framework.EchoMany(t.Context(), ns, proto, addr, 30)
		if err != nil {
			return false, nil
		}
		for name := range counts {
			if !slices.Contains(want, name) {
				return false, nil
			}
		}
		return !all || len(counts) == len(want), nil
	})
	if err != nil {
		t.Fatalf("%s %s from %s: last answers %v, want only %v (all=%v): %v", proto, addr, ns, counts, want, all, err)
	}
	return counts
}

func testClusterIPSpread(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "spread", m.Topo.Pods...)
	for _, proto := range []string{"tcp", "udp"} {
		counts := waitServed(t, m.Topo.ClientNS, proto, hostPort(svc.Spec.ClusterIP, 80), podNames(m.Topo.Pods), true)
		t.Logf("%s %s spread over 30 requests: %v", m.mode, proto, counts)
	}
	// From a pod (inside the cluster CIDR) too.
	waitServed(t, m.Topo.Pods[0].NS, "tcp", hostPort(svc.Spec.ClusterIP, 80), podNames(m.Topo.Pods), true)
}

func testNodePort(t *testing.T, m *modeEnv) {
	svc := nodePortEcho(t, m.Env, "np")
	addr := hostPort(m.Topo.NodeIP, svc.Spec.Ports[0].NodePort)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(m.Topo.Pods), true)
}

// nodePortEcho creates a NodePort Service of one TCP port with every pod
// of the Env as an endpoint.
func nodePortEcho(t *testing.T, env *framework.Env, name string) *corev1.Service {
	t.Helper()
	svc := framework.NewService(env.Namespace, name, framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc = env.CreateService(t, svc)
	env.CreateEndpointSlice(t, framework.NewEndpointSlice(svc, "1",
		[]discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.EchoPort)},
		framework.PodEndpoints(env.Topo.NodeName, env.Topo.Pods...)...))
	return svc
}

func testExternalAndLB(t *testing.T, m *modeEnv) {
	const extIP, lbIP = "203.0.113.10", "203.0.113.20"
	svc := framework.NewService(m.Namespace, "lb", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalIPs = []string{extIP}
	svc = m.CreateService(t, svc)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbIP}}
	if _, err := suite.Cluster.Client.CoreV1().Services(m.Namespace).UpdateStatus(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting load balancer status: %v", err)
	}
	m.CreateEndpointSlice(t, framework.NewEndpointSlice(svc, "1",
		[]discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.EchoPort)},
		framework.PodEndpoints(m.Topo.NodeName, m.Topo.Pods...)...))
	waitServed(t, m.Topo.ClientNS, "tcp", hostPort(extIP, 80), podNames(m.Topo.Pods), true)
	waitServed(t, m.Topo.ClientNS, "tcp", hostPort(lbIP, 80), podNames(m.Topo.Pods), true)
}

func testAffinity(t *testing.T, m *modeEnv) {
	svc := framework.NewService(m.Namespace, "sticky", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc = m.CreateService(t, svc)
	m.CreateEndpointSlice(t, framework.NewEndpointSlice(svc, "1",
		[]discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.EchoPort)},
		framework.PodEndpoints(m.Topo.NodeName, m.Topo.Pods...)...))
	addr := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(m.Topo.Pods), false)
	counts, err := framework.EchoMany(t.Context(), m.Topo.ClientNS, "tcp", addr, 30)
	if err != nil || len(counts) != 1 {
		t.Fatalf("30 requests with ClientIP affinity went to %v (err %v); want one pod", counts, err)
	}
}

func testEndpointRemoval(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "shrink", m.Topo.Pods...)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(m.Topo.Pods), true)
	keep := m.Topo.Pods[1:]
	updateSliceEndpoints(t, m, svc, framework.PodEndpoints(m.Topo.NodeName, keep...))
	counts := waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(keep), true)
	t.Logf("after removing %s: %v", m.Topo.Pods[0].Name, counts)
}

func updateSliceEndpoints(t *testing.T, m *modeEnv, svc *corev1.Service, eps []discoveryv1.Endpoint) {
	t.Helper()
	slices := suite.Cluster.Client.DiscoveryV1().EndpointSlices(m.Namespace)
	s, err := slices.Get(t.Context(), svc.Name+"-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Endpoints = eps
	framework.SetTriggerTime(s, time.Now())
	if _, err := slices.Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testNoEndpoints(t *testing.T, m *modeEnv) {
	svc := m.CreateService(t, framework.NewService(m.Namespace, "empty", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort)))
	addr := hostPort(svc.Spec.ClusterIP, 80)
	var took time.Duration
	var last error
	err := framework.WaitFor(converge, func() (bool, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, last = framework.Echo(ctx, m.Topo.ClientNS, "tcp", addr)
		took = time.Since(start)
		return last != nil && strings.Contains(last.Error(), "refused"), nil
	})
	if err != nil {
		t.Fatalf("connecting to a service without endpoints was never refused (last error %v): %v\n%s", last, err,
			nodeRules(t, m))
	}
	// The attempt above may have started before the rule existed; time a
	// fresh one against the programmed rule. The kernel rate-limits the
	// ICMP errors REJECT sends per peer (net.ipv4.icmp_ratelimit, 1 s), so
	// leave the bucket a second to refill as an idle client would.
	time.Sleep(1100 * time.Millisecond)
	start := time.Now()
	_, last = framework.Echo(t.Context(), m.Topo.ClientNS, "tcp", addr)
	took = time.Since(start)
	if last == nil || !strings.Contains(last.Error(), "refused") {
		t.Fatalf("second attempt: %v, want connection refused", last)
	}
	if took > 500*time.Millisecond {
		t.Errorf("refusal took %v; a client must fail fast", took)
	}
	t.Logf("refused in %v", took)
}

func testIgnoredServices(t *testing.T, m *modeEnv) {
	headless := framework.NewService(m.Namespace, "headless", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	m.CreateService(t, headless)
	ext := framework.NewService(m.Namespace, "extname")
	ext.Spec.Type, ext.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.invalid"
	m.CreateService(t, ext)
	other := framework.NewService(m.Namespace, "other-proxy", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	other.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "someone-else"}
	other = m.CreateService(t, other)
	m.CreateEndpointSlice(t, framework.NewEndpointSlice(other, "1",
		[]discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.EchoPort)},
		framework.PodEndpoints(m.Topo.NodeName, m.Topo.Pods...)...))
	// A marker service created after them proves the daemon has seen them.
	marker := m.EchoService(t, "marker", m.Topo.Pods...)
	waitServed(t, m.Topo.ClientNS, "tcp", hostPort(marker.Spec.ClusterIP, 80), podNames(m.Topo.Pods), false)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if r, err := framework.Echo(ctx, m.Topo.ClientNS, "tcp", hostPort(other.Spec.ClusterIP, 80)); err == nil {
		t.Errorf("service labelled for another proxy answered (%v): switchyard must leave it alone", r)
	}
	switch m.mode {
	case "iptables":
		out := nodeIPTables(t, m, "-t", "nat", "-S")
		for _, name := range []string{"/headless", "/extname", "/other-proxy"} {
			if strings.Contains(out, m.Namespace+name) {
				t.Errorf("nat table mentions %s%s:\n%s", m.Namespace, name, out)
			}
		}
	case "ipvs":
		checkNoIPVSFor(t, m, other.Spec.ClusterIP)
	case "nftables":
		checkNoNFTFor(t, m, "headless", "extname", "other-proxy")
	}
}

// testExternalLocal: with externalTrafficPolicy Local, NodePort traffic
// from outside reaches only this node's endpoints, with the client's source
// address preserved; the cluster IP still reaches every endpoint.
func testExternalLocal(t *testing.T, m *modeEnv) {
	svc := framework.NewService(m.Namespace, "local", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc = m.CreateService(t, svc)
	local, remote := m.Topo.Pods[:1], m.Topo.Pods[1:]
	eps := framework.PodEndpoints(m.Topo.NodeName, local...)
	for _, e := range framework.PodEndpoints("other-node", remote...) {
		eps = append(eps, e)
	}
	m.CreateEndpointSlice(t, framework.NewEndpointSlice(svc, "1",
		[]discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.EchoPort)}, eps...))
	np := hostPort(m.Topo.NodeIP, svc.Spec.Ports[0].NodePort)
	waitServed(t, m.Topo.ClientNS, "tcp", np, podNames(local), true)
	r, err := framework.Echo(t.Context(), m.Topo.ClientNS, "tcp", np)
	// The userspace proxy connects to the local pod from the client's
	// address (--userspace-transparent); the kernel modes keep it.
	if err != nil || r.SourceIP() != m.Topo.ClientIP {
		t.Errorf("eTP=Local NodePort: pod saw source %q (err %v), want the client %s unmasqueraded", r.SourceIP(), err, m.Topo.ClientIP)
	}
	waitServed(t, m.Topo.ClientNS, "tcp", hostPort(svc.Spec.ClusterIP, 80), podNames(m.Topo.Pods), true)
}

// testProgrammingLatency measures from an EndpointSlice update to the first
// connection that reaches the new endpoint. Reported, not asserted.
func testProgrammingLatency(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "latency", m.Topo.Pods[:1]...)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(m.Topo.Pods[:1]), true)
	target := m.Topo.Pods[2:3]
	start := time.Now()
	updateSliceEndpoints(t, m, svc, framework.PodEndpoints(m.Topo.NodeName, target...))
	err := framework.WaitFor(converge, func() (bool, error) {
		r, err := framework.Echo(t.Context(), m.Topo.ClientNS, "tcp", addr)
		return err == nil && r.Name == target[0].Name, nil
	})
	if err != nil {
		t.Fatalf("new endpoint never reached: %v", err)
	}
	t.Logf("%s network programming latency (slice update -> first connection to new endpoint): %v", m.mode, time.Since(start).Round(time.Millisecond))
}

// nodeRules is what to print when a check fails: the mode's table.
func nodeRules(t *testing.T, m *modeEnv) string {
	t.Helper()
	if m.mode == "nftables" {
		return nodeNFT(t, m, "list", "table", "ip", "kube-proxy")
	}
	return nodeIPTables(t, m, "-S")
}

func nodeIPTables(t *testing.T, m *modeEnv, args ...string) string {
	t.Helper()
	return nodeCommand(t, m, append([]string{"iptables"}, args...)...)
}

func nodeCommand(t *testing.T, m *modeEnv, argv ...string) string {
	t.Helper()
	out, err := framework.RunIn(t.Context(), m.Topo.NodeNS, argv...)
	if err != nil {
		t.Fatalf("%v in %s: %v\n%s", argv, m.Topo.NodeNS, err, out)
	}
	return out
}

// testKubeServicesListing checks what an operator sees with
// `iptables -t nat -L -n KUBE-SERVICES`: service comments, KUBE-SVC targets
// and KUBE-NODEPORTS as the last rule.
func testKubeServicesListing(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "listing", m.Topo.Pods...)
	want := m.Namespace + "/listing:tcp cluster IP"
	var out string
	err := framework.WaitFor(converge, func() (bool, error) {
		out = nodeIPTables(t, m, "-t", "nat", "-L", "KUBE-SERVICES", "-n")
		return strings.Contains(out, want), nil
	})
	if err != nil {
		t.Fatalf("KUBE-SERVICES never showed %q:\n%s", want, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("iptables -t nat -L -n KUBE-SERVICES:\n%s", out)
	var svcLine string
	for _, l := range lines {
		if strings.Contains(l, want) {
			svcLine = l
		}
	}
	if !strings.HasPrefix(svcLine, "KUBE-SVC-") || !strings.Contains(svcLine, svc.Spec.ClusterIP) || !strings.Contains(svcLine, "tcp dpt:80") {
		t.Errorf("service rule %q: want a KUBE-SVC-* target for %s tcp dpt:80", svcLine, svc.Spec.ClusterIP)
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "KUBE-NODEPORTS") || !strings.Contains(last, "ADDRTYPE match dst-type LOCAL") {
		t.Errorf("last rule %q: want KUBE-NODEPORTS with ADDRTYPE match dst-type LOCAL", last)
	}
}

func testPrometheus(t *testing.T, m *modeEnv) {
	prom := m.StartPrometheus(t)
	for _, q := range []string{
		`kubeproxy_sync_proxy_rules_duration_seconds_count > 0`,
		`kubeproxy_network_programming_duration_seconds_count > 0`,
	} {
		err := framework.WaitFor(converge, func() (bool, error) {
			s, err := prom.Query(t.Context(), q)
			return err == nil && len(s) > 0, nil
		})
		if err != nil {
			t.Errorf("prometheus query %q never returned a sample: %v", q, err)
		}
	}
	for _, path := range []string{"/healthz", "/livez"} {
		code, body, err := m.daemon.Get(t.Context(), m.daemon.HealthzAddr, path)
		if err != nil || code != 200 {
			t.Errorf("GET %s: %d %q %v", path, code, body, err)
		}
	}
}

// withoutKubeletFirewall drops the lines of filter KUBE-FIREWALL (the chain,
// its rule, the jumps to it). kubelet owns that chain; kube-proxy writes the
// same rule for localhost NodePorts and, like switchyard, leaves it in
// place on --cleanup.
func withoutKubeletFirewall(save string) string {
	var keep []string
	for _, line := range strings.Split(save, "\n") {
		if !strings.Contains(line, "KUBE-FIREWALL") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}
