//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// Knobs of TestBenchDataplane (`make bench-dataplane`, hack/bench/dataplane.sh);
// it is skipped unless SWITCHYARD_BENCH_DP_SIZES is set.
const (
	dpSizesEnv     = "SWITCHYARD_BENCH_DP_SIZES"     // "1000 10000": Services in the apiserver, ascending
	dpDurationEnv  = "SWITCHYARD_BENCH_DP_DURATION"  // one measurement, "3s"
	dpRoundsEnv    = "SWITCHYARD_BENCH_DP_ROUNDS"    // rounds over every path, 3
	dpPathsEnv     = "SWITCHYARD_BENCH_DP_PATHS"     // see dpDefaultPaths
	dpViasEnv      = "SWITCHYARD_BENCH_DP_VIAS"      // "clusterip nodeport local"
	dpWorkloadsEnv = "SWITCHYARD_BENCH_DP_WORKLOADS" // "short latency stream udp"
	dpClientsEnv   = "SWITCHYARD_BENCH_DP_CLIENTS"   // parallel clients (short, udp), 16
	dpBinEnv       = "SWITCHYARD_BENCH_DP_BIN"       // the load generator; built when unset
	dpOutEnv       = "SWITCHYARD_BENCH_DP_OUT"       // file for the tables and result lines
	dpSkipEnv      = "SWITCHYARD_BENCH_DP_SKIP"      // "PROXY:MODE@N ...": paths not run at those N
	dpSyncWaitEnv  = "SWITCHYARD_BENCH_DP_SYNC_WAIT" // bound of a proxy's first sync, scaleTimeBox
	// "ipv4" (default) or "ipv6": the family of every topology, of the
	// measured and eTP=Local Services (single-stack) and of the
	// background; every table and result line says it (family=...).
	dpFamilyEnv = "SWITCHYARD_BENCH_DP_FAMILY"
	// Where the run happens, added to every result line as env=LABEL
	// (hack/vm/bench-dataplane-vm.sh: "vm-tcg"); the result line is then
	// "dataplane-vm-result:" when LABEL starts with "vm", so a VM's figures
	// are never read as the host's. Unset: the host, no label.
	dpEnvLabelEnv = "SWITCHYARD_BENCH_DP_ENV"
)

const dpDefaultPaths = "direct switchyard:iptables switchyard:iptables-legacy switchyard:nftables switchyard:userspace kube-proxy:iptables kube-proxy:nftables"

// Ports of the load generator's servers (hack/bench/dataplane serve) and of
// the measured Services.
const (
	dpRRPort, dpSinkPort, dpUDPPort    = 9000, 9001, 9002
	dpSvcRR, dpSvcSink, dpSvcUDP       = 80, 81, 53
	dpClientCPU, dpServerCPU           = "0", "1"
	dpMeasuredServices                 = 1 // the shared Service, plus one eTP=Local Service per proxy path
	dpPortRR, dpPortSink, dpPortUDPNam = "rr", "sink", "udp"
)

// dpPath is one data path: its own topology (node, client and pod
// namespaces), the proxy running in its node namespace, and its
// externalTrafficPolicy=Local NodePort Service. Every path's pods have the
// same addresses, so the shared Service reaches each path's own pods.
type dpPath struct {
	mode    string // "direct", "iptables", "iptables-legacy", "nftables", "userspace", "ipvs" (in the VM)
	proxy   string // "none", "switchyard", "kube-proxy"
	env     *framework.Env
	daemon  *framework.Daemon
	local   *corev1.Service
	skipped bool // not measured at this N (SWITCHYARD_BENCH_DP_SKIP, or no first sync in time)
}

func (p *dpPath) label() string { return p.proxy + " " + p.mode }

// TestBenchDataplane measures what each proxy mode costs traffic through a
// Service while the apiserver holds N Services (their rules in the
// kernel): short connections/s, connect latency, one stream's throughput
// and UDP request/response rate, from a client pod to the ClusterIP and
// from an external client to a NodePort and an eTP=Local NodePort, against
// the direct path (no Service, no proxy) and upstream kube-proxy in the
// same mode. Each path has its own topology; all proxies run side by side
// and the rounds go over the paths in turn, so the machine's drift falls
// on all of them alike. Results are medians over the rounds.
func TestBenchDataplane(t *testing.T) {
	sizes := envInts(t, dpSizesEnv)
	if len(sizes) == 0 {
		t.Skipf("set %s (e.g. \"1000 10000\") to run", dpSizesEnv)
	}
	cfg := dpConfigFromEnv(t)
	dpRequireFamily(t, cfg.shape)
	paths := dpSetupPaths(t, cfg)
	for _, p := range paths {
		if p.proxy != "none" {
			p.local = dpLocalService(t, p.env)
		}
	}
	bg := dpNewBackground(t, paths[0].env, cfg.shape, sizes[len(sizes)-1])
	var all []dpSample
	for _, n := range sizes {
		locals := 0
		for _, p := range paths {
			if p.local != nil {
				locals++
			}
		}
		want := n - dpMeasuredServices - locals
		bg.grow(t, want)
		// The measured Service sorts into the middle of the background
		// ones (bg-<want/2>-dp), where a chain in name order has its rule.
		shared := dpSharedService(t, paths[0].env, fmt.Sprintf("bg-%05d-dp", want/2))
		for _, p := range paths {
			p.skipped = cfg.skip[fmt.Sprintf("%s:%s@%d", p.proxy, p.mode, n)]
			if p.skipped {
				t.Logf("n=%d %s: skipped (%s)", n, p.label(), dpSkipEnv)
			}
			if lim := dpFileLimit(); p.mode == "userspace" && !p.skipped && uint64(n)+dpFileMargin > lim {
				// One listening socket per service port: past the
				// limit it cannot accept, not even on its metrics port.
				t.Logf("n=%d %s: skipped: it needs a socket per service port and the open-file limit is %d", n, p.label(), lim)
				p.skipped = true
			}
		}
		dpStartProxies(t, cfg, paths, shared, n)
		samples := dpMeasure(t, cfg, paths, shared, n)
		all = append(all, samples...)
		dpReport(t, cfg, n, samples)
		dpStopProxies(t, paths)
		dpDeleteShared(t, bg.cs, paths[0].env, shared)
	}
	dpSummary(t, cfg, sizes, all)
}

// dpConfig is the run's knobs.
type dpConfig struct {
	bin       string
	duration  time.Duration
	rounds    int
	clients   int
	paths     []string
	vias      []string
	workloads []string
	out       io.Writer
	skip      map[string]bool // "PROXY:MODE@N" (direct: "none:direct@N")
	syncWait  time.Duration
	envLabel  string          // dpEnvLabelEnv; "" on the host
	shape     framework.Shape // dpFamilyEnv: ShapeIPv4 or ShapeIPv6
}

// resultName is the name of the run's one result line.
func (c dpConfig) resultName() string {
	if strings.HasPrefix(c.envLabel, "vm") {
		return "dataplane-vm-result"
	}
	return "dataplane-result"
}

// envField is " env=LABEL" for the per-series lines, "" on the host.
func (c dpConfig) envField() string {
	if c.envLabel == "" {
		return ""
	}
	return " env=" + c.envLabel
}

// familyField is " family=ipv4" or " family=ipv6", on every line.
func (c dpConfig) familyField() string { return " family=" + string(c.shape) }

func dpConfigFromEnv(t *testing.T) dpConfig {
	t.Helper()
	c := dpConfig{duration: 3 * time.Second, rounds: envInt(t, dpRoundsEnv, 3), clients: envInt(t, dpClientsEnv, 16)}
	if v := os.Getenv(dpDurationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %v", dpDurationEnv, err)
		}
		c.duration = d
	}
	c.paths = strings.Fields(envOr(dpPathsEnv, dpDefaultPaths))
	c.vias = strings.Fields(envOr(dpViasEnv, "clusterip nodeport local"))
	c.workloads = strings.Fields(envOr(dpWorkloadsEnv, "short latency stream udp"))
	c.skip = map[string]bool{}
	for _, f := range strings.Fields(os.Getenv(dpSkipEnv)) {
		c.skip[f] = true
	}
	c.syncWait = scaleTimeBox
	if v := os.Getenv(dpSyncWaitEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %v", dpSyncWaitEnv, err)
		}
		c.syncWait = d
	}
	c.envLabel = strings.Join(strings.Fields(os.Getenv(dpEnvLabelEnv)), "-")
	c.shape = dpShapeFromEnv(t)
	c.bin = os.Getenv(dpBinEnv)
	if c.bin == "" {
		c.bin = filepath.Join(t.TempDir(), "dataplane")
		cmd := exec.Command("go", "build", "-o", c.bin, "./hack/bench/dataplane")
		cmd.Dir = suite.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the load generator: %v\n%s", err, out)
		}
	}
	c.out = os.Stdout
	if f := os.Getenv(dpOutEnv); f != "" {
		w, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		c.out = io.MultiWriter(os.Stdout, w)
	}
	return c
}

// dpShapeFromEnv is the run's family: ipv4 (unset) or ipv6. A dual-stack
// Service has two ClusterIPs and a slice per family, so "dual" would
// measure one family's path with the other's rules beside it: refused.
func dpShapeFromEnv(t *testing.T) framework.Shape {
	t.Helper()
	v := envOr(dpFamilyEnv, string(framework.ShapeIPv4))
	s, err := framework.ParseShape(v)
	if err != nil || s == framework.ShapeDual {
		t.Fatalf("%s=%q: want ipv4 or ipv6", dpFamilyEnv, v)
	}
	return s
}

// dpRequireFamily fails (a benchmark that skips would look like one that
// ran) unless the apiserver can allocate ClusterIPs of the shape's family:
// the suite's own control plane can (framework.DefaultServiceCIDRs), a
// reused one may not.
func dpRequireFamily(t *testing.T, shape framework.Shape) {
	t.Helper()
	fams, err := framework.ServiceFamilies(t.Context(), suite.Cluster.Client)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range shape.Families() {
		if !slices.Contains(fams, f) {
			t.Fatalf("%s=%s: the apiserver's service range has %v, no %s (it needs --service-cluster-ip-range=%s)",
				dpFamilyEnv, shape, fams, f, framework.DefaultServiceCIDRs)
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInts(t *testing.T, name string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Fields(os.Getenv(name)) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 || len(out) > 0 && n <= out[len(out)-1] {
			t.Fatalf("%s=%q: want ascending positive integers", name, os.Getenv(name))
		}
		out = append(out, n)
	}
	return out
}

// dpSetupPaths builds a topology per path of the run's family (3 pods: pod0
// the client pod, pod1 and pod2 the servers, pinned to the other CPU than
// the clients).
func dpSetupPaths(t *testing.T, cfg dpConfig) []*dpPath {
	t.Helper()
	var paths []*dpPath
	for _, spec := range cfg.paths {
		p := &dpPath{mode: "direct", proxy: "none"}
		if spec != "direct" {
			var ok bool
			if p.proxy, p.mode, ok = strings.Cut(spec, ":"); !ok {
				t.Fatalf("%s: %q: want direct or PROXY:MODE", dpPathsEnv, spec)
			}
		}
		p.env = framework.Setup(t, suite, framework.TopologySpec{Pods: 3, Shape: cfg.shape})
		for _, pod := range p.env.Topo.Pods[1:] {
			framework.StartInNetns(t, "dp-"+pod.NS, pod.NS, "taskset", "-c", dpServerCPU, cfg.bin, "serve",
				"-rr", fmt.Sprintf(":%d", dpRRPort), "-sink", fmt.Sprintf(":%d", dpSinkPort), "-udp", fmt.Sprintf(":%d", dpUDPPort))
		}
		// Short connections cycle through the clients' ports fast (the
		// ipv4 sysctl is the ephemeral range of IPv6 sockets too).
		for _, ns := range []string{p.env.Topo.Pods[0].NS, p.env.Topo.ClientNS, p.env.Topo.NodeNS} {
			if out, err := framework.RunIn(t.Context(), ns, "sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=1024 65000"); err != nil {
				t.Fatalf("sysctl in %s: %v\n%s", ns, err, out)
			}
		}
		paths = append(paths, p)
	}
	return paths
}

// dpFileMargin is what the userspace proxy needs open besides its
// listeners (the API, metrics, proxied connections).
const dpFileMargin = 1024

// dpFileLimit is the hard limit of open files the proxies inherit (the Go
// runtime raises its soft limit to it); without CAP_SYS_RESOURCE it cannot
// be raised.
func dpFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1 << 62
	}
	return r.Max
}

// dpPorts are the measured Services' ports and their endpoint ports.
func dpPorts() ([]corev1.ServicePort, []discoveryv1.EndpointPort) {
	return []corev1.ServicePort{
			framework.NewServicePort(dpPortRR, corev1.ProtocolTCP, dpSvcRR, dpRRPort),
			framework.NewServicePort(dpPortSink, corev1.ProtocolTCP, dpSvcSink, dpSinkPort),
			framework.NewServicePort(dpPortUDPNam, corev1.ProtocolUDP, dpSvcUDP, dpUDPPort),
		}, []discoveryv1.EndpointPort{
			framework.NewEndpointPort(dpPortRR, corev1.ProtocolTCP, dpRRPort),
			framework.NewEndpointPort(dpPortSink, corev1.ProtocolTCP, dpSinkPort),
			framework.NewEndpointPort(dpPortUDPNam, corev1.ProtocolUDP, dpUDPPort),
		}
}

// dpSharedService is the measured NodePort Service (eTP=Cluster),
// endpoints pod1 and pod2, created through the API.
func dpSharedService(t *testing.T, env *framework.Env, name string) *corev1.Service {
	t.Helper()
	sps, eps := dpPorts()
	svc := framework.NewService(env.Namespace, name, sps...)
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc = env.CreateService(t, svc)
	env.CreatePodSlices(t, svc, "1", eps, env.Topo.Pods[1:]...)
	return svc
}

// dpLocalService is a path's eTP=Local NodePort Service, its endpoints
// pod1 and pod2 on that path's node.
func dpLocalService(t *testing.T, env *framework.Env) *corev1.Service {
	t.Helper()
	sps, eps := dpPorts()
	svc := framework.NewService(env.Namespace, "dp-local", sps...)
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc = env.CreateService(t, svc)
	env.CreatePodSlices(t, svc, "1", eps, env.Topo.Pods[1:]...)
	return svc
}

// dpBackground is the run's background Services (one endpoint, one port
// each, of the run's family, as backgroundObjectsOf builds them), in one
// namespace: created through
// the API, or written straight into the apiserver's etcd when seedByEtcd
// says so for the run's largest N (above seedAutoAbove, or
// SWITCHYARD_SCALE_SEED=etcd), since creating tens of thousands through the
// API is O(n²) in kube-apiserver's ClusterIP allocator. The objects are the
// same either way (TestSeedBackground compares them); one run's background
// all comes one way. Cleanup deletes them the way they came.
type dpBackground struct {
	cs     kubernetes.Interface
	env    *framework.Env
	shape  framework.Shape
	seeder *framework.ServiceSeeder // nil: through the API
	have   int
}

func dpNewBackground(t *testing.T, env *framework.Env, shape framework.Shape, largest int) *dpBackground {
	t.Helper()
	b := &dpBackground{cs: burstClient(t), env: env, shape: shape}
	if !seedByEtcd(t, largest) {
		t.Cleanup(func() { deleteBackground(t, b.cs, env, b.have) })
		return b
	}
	etcd, err := framework.DialEtcd(suite.Cluster.EtcdEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Close() })
	b.seeder = newSeeder(t, etcd, shape)
	t.Cleanup(func() { unseedBackground(t, b.cs, b.seeder, env.Namespace) })
	return b
}

// grow creates background Services have..want-1.
func (b *dpBackground) grow(t *testing.T, want int) {
	t.Helper()
	if want <= b.have {
		return
	}
	start, have := time.Now(), b.have
	if b.seeder == nil {
		parallel(t, want-have, func(i int) error { return createBackgroundService(t.Context(), b.cs, b.env, have+i, 1, 1) })
		b.have = want
		t.Logf("%s background services %d..%d created through the API in %s", b.shape, have, want-1, secs(time.Since(start)))
		return
	}
	ns, node := b.env.Namespace, b.env.Topo.NodeName
	svcs0, slices0, err := countServices(t.Context(), b.cs, ns)
	if err != nil {
		t.Fatal(err)
	}
	err = b.seeder.Seed(t.Context(), want-have, func(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
		return seedObjects(b.shape, ns, node, have+i, 1, 1)
	})
	if err != nil {
		t.Fatalf("seeding etcd: %v", err)
	}
	b.have = want
	written := time.Now()
	var svcs, slices int
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, seedWait, true, func(ctx context.Context) (bool, error) {
		var lerr error
		svcs, slices, lerr = countServices(ctx, b.cs, ns)
		return lerr == nil && svcs == svcs0+want-have && slices == slices0+want-have, nil
	})
	if err != nil {
		t.Fatalf("after seeding etcd the API lists %d services and %d slices in %s, want %d and %d: %v",
			svcs, slices, ns, svcs0+want-have, slices0+want-have, err)
	}
	t.Logf("%s background services %d..%d seeded in etcd in %s (%s waiting for the apiserver's repair loop; listed through the API %s later)",
		b.shape, have, want-1, secs(time.Since(start)), secs(b.seeder.Waited), secs(time.Since(written)))
}

// dpDeleteShared deletes the measured Service and its slice through the
// API (the next N has its own, named for its middle).
func dpDeleteShared(t *testing.T, cs kubernetes.Interface, env *framework.Env, svc *corev1.Service) {
	t.Helper()
	ctx := t.Context()
	sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name}
	if err := cs.DiscoveryV1().EndpointSlices(env.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Errorf("deleting %s's slices: %v", svc.Name, err)
	}
	if err := cs.CoreV1().Services(env.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting %s: %v", svc.Name, err)
	}
}

// dpStartProxies starts every path's proxy from an empty kernel, waits for
// its first sync and for the measured Services to answer, then stops
// (SIGSTOP) the kernel-mode proxies so their periodic work does not fall
// into another path's measurement; their rules stay.
func dpStartProxies(t *testing.T, cfg dpConfig, paths []*dpPath, shared *corev1.Service, n int) {
	t.Helper()
	start := time.Now()
	for _, p := range paths {
		if p.proxy == "none" || p.skipped {
			continue
		}
		dpFlushKernel(t, p.env)
		if p.mode == "iptables-legacy" { // kubelet's hint: switchyard picks legacy
			_, _ = framework.RunIn(t.Context(), p.env.Topo.NodeNS, "iptables-legacy", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT")
		}
		mode := strings.TrimSuffix(p.mode, "-legacy")
		if p.proxy == "kube-proxy" {
			p.daemon = p.env.StartKubeProxy(t, "--proxy-mode="+mode)
		} else {
			p.daemon = p.env.StartDaemon(t, "--proxy-mode="+mode)
		}
	}
	for _, p := range paths {
		if p.daemon == nil {
			continue
		}
		if !dpWaitFirstSync(t, p.daemon, cfg.shape, max(0, cfg.syncWait-time.Since(start))) {
			// Not measured at this N; stopped, so that its sync does
			// not load the other paths' measurements.
			t.Logf("n=%d %s: no first sync %s after the proxies started: not measured at this N\n%s", n, p.label(), secs(time.Since(start)), p.daemon.LogTail(5))
			if err := p.daemon.Stop(); err != nil {
				t.Logf("%s: %v", p.label(), err)
			}
			p.daemon, p.skipped = nil, true
			continue
		}
		t.Logf("n=%d %s: first sync done %s after the proxies started; %s", n, p.label(), secs(time.Since(start)), dpKernelNote(t, p, shared))
		dpWaitServed(t, p, shared)
		if p.mode != "userspace" {
			dpSignal(t, p.daemon, syscall.SIGSTOP)
		}
	}
}

// dpWaitFirstSync waits until the proxy has synced every family it
// exports, the run's family among them. kube-proxy runs a proxier per
// family whenever the node's iptables has both (an IPv6-only node's too),
// and its IPv4 proxier, with nothing to program, can report its first sync
// before the IPv6 one exports any: waitTimestamp alone then took that for
// the first sync, with the IPv6 rules not yet written.
func dpWaitFirstSync(t *testing.T, d *framework.Daemon, shape framework.Shape, timeout time.Duration) bool {
	t.Helper()
	fams := shape.Families()
	err := framework.WaitFor(timeout, func() (bool, error) {
		if _, all := syncedAfter(t, d, 0); !all {
			return false, nil
		}
		ctx, cancel := context.WithTimeout(t.Context(), scrapeTimeout)
		defer cancel()
		for _, f := range fams {
			v, err := d.MetricValue(ctx, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", map[string]string{"ip_family": string(f)})
			if err != nil || v <= 0 {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

// dpStopProxies resumes and stops every proxy.
func dpStopProxies(t *testing.T, paths []*dpPath) {
	t.Helper()
	for _, p := range paths {
		if p.daemon == nil {
			continue
		}
		dpSignal(t, p.daemon, syscall.SIGCONT)
		if err := p.daemon.Stop(); err != nil {
			t.Errorf("%s: %v", p.label(), err)
		}
		p.daemon = nil
	}
}

// dpSignal sends sig to the proxy by its PID; a stopped proxy is resumed
// before the test's cleanup stops it.
func dpSignal(t *testing.T, d *framework.Daemon, sig syscall.Signal) {
	t.Helper()
	if exited, _ := d.Exited(); exited {
		return
	}
	if err := syscall.Kill(d.PID(), sig); err != nil {
		t.Errorf("%v to pid %d: %v", sig, d.PID(), err)
	}
	if sig == syscall.SIGSTOP {
		t.Cleanup(func() { _ = syscall.Kill(d.PID(), syscall.SIGCONT) })
	}
}

// dpFlushKernel leaves the node namespace without any proxy's rules, nft
// (`nft flush ruleset` takes both families) and legacy (ip6tables-legacy
// too in an IPv6 topology), and without IPVS virtual servers (where the
// kernel has IPVS: in the VM).
func dpFlushKernel(t *testing.T, env *framework.Env) {
	t.Helper()
	flushKernel(t, env)
	_, _ = framework.RunIn(t.Context(), env.Topo.NodeNS, "ipvsadm", "-C")
	legacy := []string{"iptables-legacy"}
	if env.Topo.Shape.HasIPv6() {
		legacy = append(legacy, "ip6tables-legacy")
	}
	for _, bin := range legacy {
		for _, table := range []string{"nat", "filter", "mangle"} {
			_, _ = framework.RunIn(t.Context(), env.Topo.NodeNS, bin, "-t", table, "-F")
			_, _ = framework.RunIn(t.Context(), env.Topo.NodeNS, bin, "-t", table, "-X")
		}
	}
}

// dpWaitServed waits until the measured Services answer on every via.
func dpWaitServed(t *testing.T, p *dpPath, shared *corev1.Service) {
	t.Helper()
	for _, via := range []string{"clusterip", "nodeport", "local"} {
		ns, addrs := dpTarget(p, shared, via, "short")
		err := framework.WaitFor(2*time.Minute, func() (bool, error) {
			return dpProbe(t.Context(), ns, addrs[0]) == nil, nil
		})
		if err != nil {
			t.Fatalf("%s: %s %s never answered from %s", p.label(), via, addrs[0], ns)
		}
	}
}

// dpProbe makes one request of the short workload.
func dpProbe(ctx context.Context, ns, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	c, err := framework.DialContextIn(ctx, ns, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write(make([]byte, 64)); err != nil {
		return err
	}
	_, err = io.ReadAll(c)
	return err
}
