//go:build e2e

package e2e

import (
	"context"
	"fmt"
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
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// converge bounds how long the daemon may take to program a change.
const converge = 20 * time.Second

// modeEnv is one daemon in one topology, shared by the subtests of a mode
// and IP family shape.
type modeEnv struct {
	*framework.Env
	mode   string
	daemon *framework.Daemon
}

func startMode(t *testing.T, mode string, pods int, args ...string) *modeEnv {
	t.Helper()
	return startModeShape(t, mode, framework.ShapeIPv4, pods, args...)
}

// startModeShape starts the daemon in mode in a topology of shape (its
// --cluster-cidr names every family of the shape).
func startModeShape(t *testing.T, mode string, shape framework.Shape, pods int, args ...string) *modeEnv {
	t.Helper()
	env := framework.Setup(t, suite, framework.TopologySpec{Pods: pods, Shape: shape})
	d := env.StartDaemon(t, append([]string{"--proxy-mode=" + mode}, args...)...)
	if err := d.WaitHealthy(converge); err != nil {
		t.Fatalf("%s daemon not healthy: %v\n%s", mode, err, d.LogTail(40))
	}
	return &modeEnv{Env: env, mode: mode, daemon: d}
}

// famView is one IP family's side of a modeEnv. Its Topo is the family's
// view of the topology (framework.Topology.For): NodeIP, ClientIP,
// BridgeIP and every pod's IP are that family's, so a check reads the same
// for IPv4 and IPv6. The Services and EndpointSlices a case creates through
// the embedded Env carry every family of the shape.
type famView struct {
	*modeEnv
	Family corev1.IPFamily
	Topo   *framework.Topology
}

// eachFamily runs fn in a subtest per IP family of the shape, primary
// first: in a dual-stack topology every check is made over IPv4 and over
// IPv6, against the same Service objects.
func (m *modeEnv) eachFamily(t *testing.T, fn func(t *testing.T, f famView)) {
	t.Helper()
	for _, f := range m.views() {
		t.Run(string(f.Family), func(t *testing.T) { fn(t, f) })
	}
}

// views lists the family views of the shape, primary first.
func (m *modeEnv) views() []famView {
	var out []famView
	for _, fam := range m.Env.Topo.Families() {
		out = append(out, famView{modeEnv: m, Family: fam, Topo: m.Env.Topo.For(fam)})
	}
	return out
}

// clusterIP is svc's cluster IP of the view's family.
func (f famView) clusterIP(t *testing.T, svc *corev1.Service) string {
	t.Helper()
	ip := framework.ClusterIPOf(svc, f.Family)
	if ip == "" {
		t.Fatalf("service %s has no %s cluster IP: %v", svc.Name, f.Family, svc.Spec.ClusterIPs)
	}
	return ip
}

// is6 tells an IPv6 view.
func (f famView) is6() bool { return f.Family == corev1.IPv6Protocol }

// outsideIP is an address of family fam outside every network of the
// topologies, for external and load-balancer IPs: 203.0.113.n
// (TEST-NET-3) or fd00:203::n (unique-local). The client reaches it
// through its default route, the node.
func outsideIP(fam corev1.IPFamily, n int) string {
	if fam == corev1.IPv6Protocol {
		return "fd00:203::" + strconv.Itoa(n)
	}
	return "203.0.113." + strconv.Itoa(n)
}

// outsideIPs is outsideIP(n) of every family of the modeEnv's shape.
func (m *modeEnv) outsideIPs(n int) []string {
	var ips []string
	for _, fam := range m.Env.Topo.Families() {
		ips = append(ips, outsideIP(fam, n))
	}
	return ips
}

// TestDataplane runs the same traffic table against each proxy mode that
// can run on this host's kernel (ipvs runs in the VM: hack/vm/e2e-ipvs.sh
// sets SWITCHYARD_E2E_MODES=ipvs there), in each IP family shape of
// $SWITCHYARD_E2E_FAMILIES (default: ipv4, ipv6 and dual), one daemon
// and topology per mode and shape.
func TestDataplane(t *testing.T) {
	shapes, err := framework.ShapesFromEnv(framework.AllShapes)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range e2eModes() {
		t.Run(mode, func(t *testing.T) {
			for _, shape := range shapes {
				t.Run(string(shape), func(t *testing.T) { runDataplaneTable(t, mode, shape) })
			}
		})
	}
}

func runDataplaneTable(t *testing.T, mode string, shape framework.Shape) {
	m := startModeShape(t, mode, shape, 3)
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
		{"outside clients are masqueraded, pods are not", testMasquerade},
		{"a UDP flow leaves a removed endpoint", testUDPFlowMoves},
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
	for _, f := range m.views() {
		waitServed(t, f.Topo.ClientNS, "tcp", hostPort(f.clusterIP(t, svc), 80), podNames(f.Topo.Pods), false)
	}
	if err := m.daemon.Stop(); err != nil {
		t.Fatalf("stopping the daemon: %v", err)
	}
	if m.mode != "userspace" { // the userspace proxy's sockets close with it
		m.eachFamily(t, func(t *testing.T, f famView) {
			if _, err := framework.Echo(t.Context(), f.Topo.ClientNS, "tcp", hostPort(f.clusterIP(t, svc), 80)); err != nil {
				t.Errorf("traffic stopped with the daemon: %v (the dataplane must stay)", err)
			}
		})
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
	checkCleanedUp(t, m)
}

// checkCleanedUp checks that --cleanup left no trace of the mode.
func checkCleanedUp(t *testing.T, m *modeEnv) {
	t.Helper()
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		if out := withoutKubeletFirewall(nodeCommand(t, m, save)); strings.Contains(out, "KUBE-") {
			t.Errorf("%s after --cleanup still has KUBE- chains:\n%s", save, out)
		}
	}
	switch m.mode {
	case "ipvs":
		checkIPVSCleanedUp(t, m)
	case "nftables":
		checkNFTCleanedUp(t, m)
	case "userspace": // its policy routing for transparent sockets
		for _, fam := range []string{"-4", "-6"} {
			if out := nodeCommand(t, m, "ip", fam, "rule", "show"); strings.Contains(out, "lookup 2510") {
				t.Errorf("ip %s rule after --cleanup still has the userspace rule:\n%s", fam, out)
			}
			// A family that never had the table says so.
			out, err := framework.RunIn(t.Context(), m.Topo.NodeNS, "ip", fam, "route", "show", "table", "2510")
			if err != nil && !strings.Contains(out, "FIB table does not exist") || err == nil && strings.TrimSpace(out) != "" {
				t.Errorf("ip %s routing table 2510 after --cleanup: %v\n%s", fam, err, out)
			}
		}
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

// probeTimeout bounds the single request waitServed polls with before it
// sends its 30: shorter than TCP's first SYN retransmission (1 s), so a
// request sent before the rules were in is given up and sent again at
// once instead of waiting out the 2 s of a normal request.
const probeTimeout = 500 * time.Millisecond

// waitServed polls until 30 requests to addr are answered only by servers
// in want (and by all of them when all is set).
func waitServed(t *testing.T, ns, proto, addr string, want []string, all bool) map[string]int {
	t.Helper()
	var counts map[string]int
	err := framework.WaitFor(converge, func() (bool, error) {
		probe, cancel := context.WithTimeout(t.Context(), probeTimeout)
		r, err := framework.Echo(probe, ns, proto, addr)
		cancel()
		if err != nil || !slices.Contains(want, r.Name) {
			counts = map[string]int{r.Name: 1}
			return false, nil
		}
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
	m.eachFamily(t, func(t *testing.T, f famView) {
		addr := hostPort(f.clusterIP(t, svc), 80)
		for _, proto := range []string{"tcp", "udp"} {
			counts := waitServed(t, f.Topo.ClientNS, proto, addr, podNames(f.Topo.Pods), true)
			t.Logf("%s %s %s spread over 30 requests: %v", m.mode, f.Family, proto, counts)
		}
		// From a pod (inside the cluster CIDR) too.
		waitServed(t, f.Topo.Pods[0].NS, "tcp", addr, podNames(f.Topo.Pods), true)
	})
}

func testNodePort(t *testing.T, m *modeEnv) {
	svc := nodePortEcho(t, m.Env, "np")
	m.eachFamily(t, func(t *testing.T, f famView) {
		addr := hostPort(f.Topo.NodeIP, svc.Spec.Ports[0].NodePort)
		waitServed(t, f.Topo.ClientNS, "tcp", addr, podNames(f.Topo.Pods), true)
	})
}

// tcpEchoPorts is the one endpoint port of the single-port TCP Services.
func tcpEchoPorts() []discoveryv1.EndpointPort {
	return []discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.EchoPort)}
}

// nodePortEcho creates a NodePort Service of one TCP port with every pod
// of the Env as an endpoint (in every family of the Env's shape).
func nodePortEcho(t *testing.T, env *framework.Env, name string) *corev1.Service {
	t.Helper()
	svc := framework.NewService(env.Namespace, name, framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc = env.CreateService(t, svc)
	env.CreatePodSlices(t, svc, "1", tcpEchoPorts(), env.Topo.Pods...)
	return svc
}

func testExternalAndLB(t *testing.T, m *modeEnv) {
	const extN, lbN = 10, 20
	svc := framework.NewService(m.Namespace, "lb", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalIPs = m.outsideIPs(extN)
	svc = m.CreateService(t, svc)
	setLoadBalancerIPs(t, m, svc, m.outsideIPs(lbN)...)
	m.CreatePodSlices(t, svc, "1", tcpEchoPorts(), m.Topo.Pods...)
	m.eachFamily(t, func(t *testing.T, f famView) {
		waitServed(t, f.Topo.ClientNS, "tcp", hostPort(outsideIP(f.Family, extN), 80), podNames(f.Topo.Pods), true)
		waitServed(t, f.Topo.ClientNS, "tcp", hostPort(outsideIP(f.Family, lbN), 80), podNames(f.Topo.Pods), true)
	})
}

// setLoadBalancerIPs writes ips as svc's load-balancer ingress, as a cloud
// controller would, and returns the updated Service.
func setLoadBalancerIPs(t *testing.T, m *modeEnv, svc *corev1.Service, ips ...string) *corev1.Service {
	t.Helper()
	svc.Status.LoadBalancer.Ingress = nil
	for _, ip := range ips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	svc, err := suite.Cluster.Client.CoreV1().Services(m.Namespace).UpdateStatus(t.Context(), svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("setting load balancer status: %v", err)
	}
	return svc
}

func testAffinity(t *testing.T, m *modeEnv) {
	svc := framework.NewService(m.Namespace, "sticky", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc = m.CreateService(t, svc)
	m.CreatePodSlices(t, svc, "1", tcpEchoPorts(), m.Topo.Pods...)
	m.eachFamily(t, func(t *testing.T, f famView) {
		addr := hostPort(f.clusterIP(t, svc), 80)
		waitServed(t, f.Topo.ClientNS, "tcp", addr, podNames(f.Topo.Pods), false)
		counts, err := framework.EchoMany(t.Context(), f.Topo.ClientNS, "tcp", addr, 30)
		if err != nil || len(counts) != 1 {
			t.Fatalf("30 requests with ClientIP affinity went to %v (err %v); want one pod", counts, err)
		}
	})
}

func testEndpointRemoval(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "shrink", m.Topo.Pods...)
	m.eachFamily(t, func(t *testing.T, f famView) {
		addr := hostPort(f.clusterIP(t, svc), 80)
		waitServed(t, f.Topo.ClientNS, "tcp", addr, podNames(f.Topo.Pods), true)
		keep := f.Topo.Pods[1:]
		updateSliceEndpoints(t, m, svc, f.Family, keep...)
		counts := waitServed(t, f.Topo.ClientNS, "tcp", addr, podNames(keep), true)
		t.Logf("after removing %s from the %s slice: %v", f.Topo.Pods[0].Name, f.Family, counts)
	})
}

// updateSliceEndpoints makes pods (on this node) the endpoints of svc's
// "1" EndpointSlice of family fam.
func updateSliceEndpoints(t *testing.T, m *modeEnv, svc *corev1.Service, fam corev1.IPFamily, pods ...framework.Pod) {
	t.Helper()
	slices := suite.Cluster.Client.DiscoveryV1().EndpointSlices(m.Namespace)
	s, err := slices.Get(t.Context(), m.SliceName(svc, "1", fam), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Endpoints = framework.PodEndpointsOf(fam, m.Topo.NodeName, pods...)
	framework.SetTriggerTime(s, time.Now())
	if _, err := slices.Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testNoEndpoints(t *testing.T, m *modeEnv) {
	svc := m.CreateService(t, framework.NewService(m.Namespace, "empty", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort)))
	m.eachFamily(t, func(t *testing.T, f famView) {
		addr := hostPort(f.clusterIP(t, svc), 80)
		var last error
		err := framework.WaitFor(converge, func() (bool, error) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			_, last = framework.Echo(ctx, f.Topo.ClientNS, "tcp", addr)
			return last != nil && strings.Contains(last.Error(), "refused"), nil
		})
		if err != nil {
			t.Fatalf("connecting to a service without endpoints was never refused (last error %v): %v\n%s", last, err,
				f.nodeRules(t))
		}
		checkRefusedFast(t, f, addr)
	})
}

// checkRefusedFast times one connection to addr, which must be refused
// at once. The attempts before may have started before the rule existed;
// this one meets the programmed rule. The kernel rate-limits the ICMP
// errors REJECT sends per peer (net.ipv4.icmp_ratelimit,
// net.ipv6.icmp.ratelimit: 1 s), so the bucket gets a second to refill
// first, as an idle client's would.
//
// On these veths the error can come back while the client's own connect
// still holds its socket lock (the SYN's transmit runs the node's softirq
// inline); the client's kernel then drops it and counts it in
// TcpExtLockDroppedIcmps, and the refusal comes with the SYN's first
// retransmission, 1 s later (seen with every IPv6 connection here). That
// case is allowed, and said.
func checkRefusedFast(t *testing.T, f famView, addr string) {
	t.Helper()
	time.Sleep(1100 * time.Millisecond)
	dropped := lockDroppedICMPs(t, f.Topo.ClientNS)
	start := time.Now()
	_, err := framework.Echo(t.Context(), f.Topo.ClientNS, "tcp", addr)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("second attempt: %v, want connection refused", err)
	}
	limit, why := 500*time.Millisecond, ""
	if n := lockDroppedICMPs(t, f.Topo.ClientNS) - dropped; n > 0 && took > limit {
		limit = 1500 * time.Millisecond
		why = fmt.Sprintf(" (the client's kernel dropped %d ICMP error(s) that met its locked socket, TcpExtLockDroppedIcmps; the SYN's retransmission was refused)", n)
	}
	if took > limit {
		t.Errorf("refusal took %v%s; a client must fail fast", took, why)
	}
	t.Logf("%s refused in %v%s", f.Family, took, why)
}

// lockDroppedICMPs reads TcpExtLockDroppedIcmps of namespace ns.
func lockDroppedICMPs(t *testing.T, ns string) int {
	t.Helper()
	c, err := kerneltest.ReadNetCounters(ns)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := c["TcpExtLockDroppedIcmps"]
	if !ok {
		t.Fatalf("no TcpExt LockDroppedIcmps in %s's /proc/net/netstat", ns)
	}
	return int(n)
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
	m.CreatePodSlices(t, other, "1", tcpEchoPorts(), m.Topo.Pods...)
	// A marker service created after them proves the daemon has seen them.
	marker := m.EchoService(t, "marker", m.Topo.Pods...)
	m.eachFamily(t, func(t *testing.T, f famView) {
		waitServed(t, f.Topo.ClientNS, "tcp", hostPort(f.clusterIP(t, marker), 80), podNames(f.Topo.Pods), false)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		if r, err := framework.Echo(ctx, f.Topo.ClientNS, "tcp", hostPort(f.clusterIP(t, other), 80)); err == nil {
			t.Errorf("service labelled for another proxy answered (%v): switchyard must leave it alone", r)
		}
		switch m.mode {
		case "iptables":
			out := f.iptables(t, "-t", "nat", "-S")
			for _, name := range []string{"/headless", "/extname", "/other-proxy"} {
				if strings.Contains(out, m.Namespace+name) {
					t.Errorf("nat table mentions %s%s:\n%s", m.Namespace, name, out)
				}
			}
		case "ipvs":
			checkNoIPVSFor(t, m, f.clusterIP(t, other))
		case "nftables":
			checkNoNFTFor(t, f, "headless", "extname", "other-proxy")
		}
	})
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
	m.CreateFamilySlices(t, svc, "1", tcpEchoPorts(), func(fam corev1.IPFamily) []discoveryv1.Endpoint {
		return append(framework.PodEndpointsOf(fam, m.Topo.NodeName, local...), framework.PodEndpointsOf(fam, "other-node", remote...)...)
	})
	m.eachFamily(t, func(t *testing.T, f famView) {
		np := hostPort(f.Topo.NodeIP, svc.Spec.Ports[0].NodePort)
		waitServed(t, f.Topo.ClientNS, "tcp", np, podNames(local), true)
		r, err := framework.Echo(t.Context(), f.Topo.ClientNS, "tcp", np)
		// The userspace proxy connects to the local pod from the client's
		// address (--userspace-transparent); the kernel modes keep it.
		if err != nil || r.SourceIP() != f.Topo.ClientIP {
			t.Errorf("eTP=Local NodePort: pod saw source %q (err %v), want the client %s unmasqueraded", r.SourceIP(), err, f.Topo.ClientIP)
		}
		waitServed(t, f.Topo.ClientNS, "tcp", hostPort(f.clusterIP(t, svc), 80), podNames(f.Topo.Pods), true)
	})
}

// testMasquerade: traffic from outside the cluster CIDR to a NodePort or
// a cluster IP (externalTrafficPolicy Cluster) reaches the endpoints from
// the node's address on the pod network, so their replies come back
// through the node; a pod's traffic to another pod through the cluster IP
// keeps the pod's address. In userspace mode the proxy's own sockets
// connect, always from the node.
func testMasquerade(t *testing.T, m *modeEnv) {
	svc := nodePortEcho(t, m.Env, "masq")
	m.eachFamily(t, func(t *testing.T, f famView) {
		np := hostPort(f.Topo.NodeIP, svc.Spec.Ports[0].NodePort)
		cip := hostPort(f.clusterIP(t, svc), 80)
		for _, addr := range []string{np, cip} {
			waitServed(t, f.Topo.ClientNS, "tcp", addr, podNames(f.Topo.Pods), false)
			if seen := sources(t, f.Topo.ClientNS, addr, 6); len(seen) != 1 || seen[f.Topo.BridgeIP] == 0 {
				t.Errorf("client %s -> %s: endpoints saw %v, want only the node's %s (masqueraded)", f.Topo.ClientIP, addr, seen, f.Topo.BridgeIP)
			}
		}
		want := f.Topo.Pods[0].IP
		if m.mode == "userspace" {
			want = f.Topo.BridgeIP
		}
		for range 12 {
			r, err := framework.Echo(t.Context(), f.Topo.Pods[0].NS, "tcp", cip)
			if err != nil {
				t.Fatalf("pod %s -> %s: %v", f.Topo.Pods[0].Name, cip, err)
			}
			// A pod reaching itself through the Service (hairpin) is
			// masqueraded on purpose; only other pods are checked.
			if r.Name != f.Topo.Pods[0].Name && r.SourceIP() != want {
				t.Errorf("pod %s -> %s -> %s: source %s, want %s", f.Topo.Pods[0].IP, cip, r.Name, r.SourceIP(), want)
			}
		}
	})
}

// testUDPFlowMoves: a UDP client that keeps its socket (one source port,
// one conntrack entry) while its Service's only endpoint is replaced
// reaches the new endpoint: the entry NATed to the removed endpoint is
// deleted (kernel modes), or the proxy drops its session (userspace).
// Each family's slice is replaced on its own.
func testUDPFlowMoves(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "udp-flow", m.Topo.Pods[:1]...)
	m.eachFamily(t, func(t *testing.T, f famView) {
		addr := hostPort(f.clusterIP(t, svc), 80)
		from, to := f.Topo.Pods[0].Name, f.Topo.Pods[1].Name
		waitServed(t, f.Topo.ClientNS, "udp", addr, []string{from}, true)
		stream, err := framework.StartEchoStream(f.Topo.ClientNS, "udp", addr, 100*time.Millisecond, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Stop()
		waitStream(t, stream, from)
		start := time.Now()
		updateSliceEndpoints(t, m, svc, f.Family, f.Topo.Pods[1])
		waitStream(t, stream, to)
		t.Logf("%s %s: the UDP flow went from %s to %s %v after the slice update", m.mode, f.Family, from, to,
			time.Since(start).Round(time.Millisecond))
	})
}

// waitStream waits until the stream's latest reply comes from server.
func waitStream(t *testing.T, s *framework.EchoStream, server string) {
	t.Helper()
	var last framework.EchoResult
	err := framework.WaitFor(converge, func() (bool, error) {
		if rs := s.Results(); len(rs) > 0 {
			last = rs[len(rs)-1]
		}
		return last.Server == server, nil
	})
	if err != nil {
		t.Fatalf("the UDP flow never reached %s: last reply from %q (err %v)", server, last.Server, last.Err)
	}
}

// testProgrammingLatency measures from an EndpointSlice update to the first
// connection that reaches the new endpoint, per family (each family's
// slice is updated on its own). Reported, not asserted.
func testProgrammingLatency(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "latency", m.Topo.Pods[:1]...)
	m.eachFamily(t, func(t *testing.T, f famView) {
		addr := hostPort(f.clusterIP(t, svc), 80)
		waitServed(t, f.Topo.ClientNS, "tcp", addr, podNames(f.Topo.Pods[:1]), true)
		target := f.Topo.Pods[2:3]
		start := time.Now()
		updateSliceEndpoints(t, m, svc, f.Family, target...)
		err := framework.WaitFor(converge, func() (bool, error) {
			r, err := framework.Echo(t.Context(), f.Topo.ClientNS, "tcp", addr)
			return err == nil && r.Name == target[0].Name, nil
		})
		if err != nil {
			t.Fatalf("new endpoint never reached: %v", err)
		}
		t.Logf("%s %s network programming latency (slice update -> first connection to new endpoint): %v",
			m.mode, f.Family, time.Since(start).Round(time.Millisecond))
	})
}

// iptablesCmd is iptables or ip6tables for the view's family.
func (f famView) iptablesCmd() string {
	if f.is6() {
		return "ip6tables"
	}
	return "iptables"
}

// nftFamily is the nftables family of the view's kube-proxy table.
func (f famView) nftFamily() string {
	if f.is6() {
		return "ip6"
	}
	return "ip"
}

// iptables runs the family's iptables in the node namespace.
func (f famView) iptables(t *testing.T, args ...string) string {
	t.Helper()
	return nodeCommand(t, f.modeEnv, append([]string{f.iptablesCmd()}, args...)...)
}

// nodeRules is what to print when a check fails: the mode's table of the
// view's family.
func (f famView) nodeRules(t *testing.T) string {
	t.Helper()
	if f.mode == "nftables" {
		return nodeNFT(t, f.modeEnv, "list", "table", f.nftFamily(), "kube-proxy")
	}
	return f.iptables(t, "-S")
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
// `iptables -t nat -L -n KUBE-SERVICES` (ip6tables for IPv6): service
// comments, KUBE-SVC targets and KUBE-NODEPORTS as the last rule.
func testKubeServicesListing(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "listing", m.Topo.Pods...)
	want := m.Namespace + "/listing:tcp cluster IP"
	m.eachFamily(t, func(t *testing.T, f famView) {
		var out string
		err := framework.WaitFor(converge, func() (bool, error) {
			out = f.iptables(t, "-t", "nat", "-L", "KUBE-SERVICES", "-n")
			return strings.Contains(out, want), nil
		})
		if err != nil {
			t.Fatalf("KUBE-SERVICES never showed %q:\n%s", want, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		t.Logf("%s -t nat -L -n KUBE-SERVICES:\n%s", f.iptablesCmd(), out)
		var svcLine string
		for _, l := range lines {
			if strings.Contains(l, want) {
				svcLine = l
			}
		}
		ip := f.clusterIP(t, svc)
		if !strings.HasPrefix(svcLine, "KUBE-SVC-") || !strings.Contains(svcLine, ip) || !strings.Contains(svcLine, "tcp dpt:80") {
			t.Errorf("service rule %q: want a KUBE-SVC-* target for %s tcp dpt:80", svcLine, ip)
		}
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "KUBE-NODEPORTS") || !strings.Contains(last, "ADDRTYPE match dst-type LOCAL") {
			t.Errorf("last rule %q: want KUBE-NODEPORTS with ADDRTYPE match dst-type LOCAL", last)
		}
	})
}

// testPrometheus: Prometheus scrapes the sync metrics, and every family of
// the shape has synced (its kubeproxy_sync_proxy_rules_last_timestamp_seconds
// series is set).
func testPrometheus(t *testing.T, m *modeEnv) {
	prom := m.StartPrometheus(t)
	queries := []string{
		`kubeproxy_sync_proxy_rules_duration_seconds_count > 0`,
		`kubeproxy_network_programming_duration_seconds_count > 0`,
	}
	for _, fam := range m.Topo.Families() {
		queries = append(queries, `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="`+string(fam)+`"} > 0`)
	}
	for _, q := range queries {
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
