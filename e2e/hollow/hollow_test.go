//go:build e2e

package hollow

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// The run's settings, from the environment `make hollow` sets.
type config struct {
	counts    []int    // HOLLOW_N: hollow proxies per measurement
	services  int      // HOLLOW_SERVICES: background Services
	endpoints int      // HOLLOW_ENDPOINTS: endpoints of each
	changes   int      // HOLLOW_CHANGES: endpoint changes measured
	proxies   []string // HOLLOW_PROXIES: switchyard, kube-proxy
	// switchyardProcs (HOLLOW_SWITCHYARD_PROCS) is how many processes
	// share out switchyard's N hollow nodes: 1 by default.
	switchyardProcs      int
	switchyard, kubemark string
}

func configFromEnv(t *testing.T) config {
	t.Helper()
	c := config{
		services: envInt(t, "HOLLOW_SERVICES", 1000), endpoints: envInt(t, "HOLLOW_ENDPOINTS", 10),
		changes: envInt(t, "HOLLOW_CHANGES", 50), switchyardProcs: envInt(t, "HOLLOW_SWITCHYARD_PROCS", 1), proxies: strings.Fields(envOr("HOLLOW_PROXIES", "switchyard kube-proxy")),
		switchyard: os.Getenv("SWITCHYARD_BIN"), kubemark: os.Getenv("SWITCHYARD_KUBEMARK"),
	}
	for _, f := range strings.Fields(envOr("HOLLOW_N", "5")) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			t.Fatalf("HOLLOW_N: %q is not a count", f)
		}
		c.counts = append(c.counts, n)
	}
	if c.switchyard == "" || c.kubemark == "" {
		t.Skip("SWITCHYARD_BIN and SWITCHYARD_KUBEMARK name the binaries: run `make hollow`")
	}
	if c.services < c.changes || c.changes < 1 {
		t.Fatalf("HOLLOW_CHANGES=%d: want 1 to HOLLOW_SERVICES (%d)", c.changes, c.services)
	}
	return c
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(t *testing.T, k string, def int) int {
	v, err := strconv.Atoi(envOr(k, strconv.Itoa(def)))
	if err != nil || v < 0 {
		t.Fatalf("%s: %v", k, err)
	}
	return v
}

// afterSeed is the pause between the seeding and the first run.
const afterSeed = 30 * time.Second

// bgNS holds the background Services and the probes.
const bgNS = "hollow-bg"

// TestHollow runs each proxy's hollows at each count, in turn, against one
// apiserver, and prints the table, the fits and one line per proxy.
func TestHollow(t *testing.T) {
	cfg := configFromEnv(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := framework.StartCluster(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	api, err := readPIDFile(filepath.Join(cluster.RunDir, "kube-apiserver.pid"))
	if err != nil {
		t.Fatal(err)
	}
	cs := fastClient(t, cluster)
	seed(t, cluster, cs, cfg)
	createNodes(t, cs, cfg.counts)
	// The seeding's aftermath (the repair loop, compaction) settles
	// before the first run; then the apiserver's CPU with no proxy.
	sleep(t.Context(), afterSeed)
	cpu0 := cpuOf(t, api)
	sleep(t.Context(), quietWindow)
	t.Logf("apiserver CPU with no proxy: %.3f cores over %s", (cpuOf(t, api)-cpu0).Seconds()/quietWindow.Seconds(), quietWindow)
	var results []result
	for _, n := range cfg.counts {
		for _, proxy := range cfg.proxies {
			r := measure(t, &run{cfg: cfg, cluster: cluster, cs: cs, api: api, proxy: proxy, n: n, logDir: t.TempDir()})
			t.Logf("%s n=%d: ready in %s, fan-out p50 %.0f ms, %.1f MB per proxy, %d missed", proxy, n, r.ready.Round(time.Millisecond),
				ms(percentile(r.fanout, 50)), r.perProxyMB(), r.missed)
			results = append(results, r)
		}
	}
	report(t, cfg, results)
}

// readPIDFile reads local-up.sh's "PID STARTTIME" file.
func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s is empty", path)
	}
	return strconv.Atoi(f[0])
}

// fastClient is an admin client without client-side rate limits, in
// protobuf.
func fastClient(t *testing.T, c *framework.Cluster) kubernetes.Interface {
	t.Helper()
	cfg := *c.Config
	cfg.QPS, cfg.Burst = 2000, 4000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// seed writes the background into etcd (framework.ServiceSeeder) and
// waits until the API lists it.
func seed(t *testing.T, c *framework.Cluster, cs kubernetes.Interface, cfg config) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bgNS}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	etcd, err := framework.DialEtcd(c.EtcdEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	seeder := &framework.ServiceSeeder{Etcd: etcd, Client: c.Client}
	if err := seeder.Seed(ctx, cfg.services, func(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
		return background(i, cfg.endpoints)
	}); err != nil {
		t.Fatalf("seeding: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		svcs, err := cs.CoreV1().Services(bgNS).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		slices, err := cs.DiscoveryV1().EndpointSlices(bgNS).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(svcs.Items) == cfg.services && len(slices.Items) == cfg.services, nil
	})
	if err != nil {
		t.Fatalf("the API does not list the %d seeded services: %v", cfg.services, err)
	}
	t.Logf("seeded %d services x %d endpoints in %s", cfg.services, cfg.endpoints, time.Since(start).Round(time.Second))
}

// bgName is background service i.
func bgName(i int) string { return fmt.Sprintf("bg-%05d", i) }

// background is service i, one TCP port, and its slice of eps ready
// endpoints spread over the hollow nodes' names.
func background(i, eps int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	svc := framework.NewService(bgNS, bgName(i), framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, 8080))
	endpoints := make([]discoveryv1.Endpoint, eps)
	for j := range endpoints {
		k := i*eps + j
		endpoints[j] = framework.ReadyEndpoint(fmt.Sprintf("10.%d.%d.%d", 64+k/62500, k/250%250, k%250+1), fmt.Sprintf("%s%d", nodePrefix, k%100))
	}
	return svc, framework.NewEndpointSlice(svc, "1", []discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, 8080)}, endpoints...)
}

// createNodes registers the hollow nodes, as their kubelets would.
func createNodes(t *testing.T, cs kubernetes.Interface, counts []int) {
	t.Helper()
	n := 0
	for _, c := range counts {
		n = max(n, c)
	}
	err := framework.Parallel(n, 16, func(i int) error {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", nodePrefix, i),
			Labels: map[string]string{corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%3)}}}
		_, err := cs.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
