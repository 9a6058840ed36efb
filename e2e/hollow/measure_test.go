//go:build e2e

package hollow

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

const (
	readyTimeout = 20 * time.Minute
	// settle: after every proxy is ready, before the quiet window (the
	// apiserver finishes the lists' aftermath).
	settle = 10 * time.Second
	// quietWindow: the apiserver's CPU with the N proxies watching and
	// nothing changing.
	quietWindow = 20 * time.Second
	// probeTimeout bounds the wait for every proxy to see one change.
	probeTimeout = 30 * time.Second
	// probeGap separates two changes.
	probeGap = 250 * time.Millisecond
)

// run is one measurement: one proxy's N hollows.
type run struct {
	cfg     config
	cluster *framework.Cluster
	cs      kubernetes.Interface
	api     int
	proxy   string
	n       int
	logDir  string
}

func measure(t *testing.T, r *run) result {
	t.Helper()
	ctx := t.Context()
	res := result{proxy: r.proxy, n: r.n, changes: r.cfg.changes}
	book := newProbeBook()
	keys := newProbeKeys()
	cpu0 := cpuOf(t, r.api)
	start := time.Now()
	var f *fleet
	var err error
	switch r.proxy {
	case "switchyard":
		f, err = startSwitchyard(r.cfg.switchyard, r.cluster.Kubeconfig, r.logDir, r.n, r.cfg.switchyardProcs, book, keys.lookup)
	case "kube-proxy":
		f, err = startKubemark(r.cfg.kubemark, r.cluster.Kubeconfig, r.n, book, keys.lookup)
	default:
		t.Fatalf("HOLLOW_PROXIES: unknown proxy %q", r.proxy)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.stop()
	waitReady(t, f)
	res.ready, res.readyCPU = time.Since(start), cpuOf(t, r.api)-cpu0
	res.readyProxyCPU = cpuOfAll(t, f.pids())
	sleep(ctx, settle)
	cpu0 = cpuOf(t, r.api)
	sleep(ctx, quietWindow)
	res.quietCPU = cpuOf(t, r.api) - cpu0

	before := watchMetrics(t, r.cs)
	cpu0, pcpu0 := cpuOf(t, r.api), cpuOfAll(t, f.pids())
	start = time.Now()
	probes := writeProbes(t, r, f, book, keys)
	res.probeWall, res.probeCPU = time.Since(start), cpuOf(t, r.api)-cpu0
	res.proxyCPU = cpuOfAll(t, f.pids()) - pcpu0
	after := watchMetrics(t, r.cs)
	res.watchBytes, res.watchEvents = after.bytes-before.bytes, after.events-before.events
	if err := f.alive(); err != nil {
		t.Fatal(err)
	}
	mem, err := framework.ReadMemory(r.api)
	if err != nil {
		t.Fatal(err)
	}
	res.apiRSS = mem.RSS
	for _, pid := range f.pids() {
		m, err := framework.ReadMemory(pid)
		if err != nil {
			t.Fatal(err)
		}
		res.proxyRSS, res.proxyAnon = append(res.proxyRSS, m.RSS), append(res.proxyAnon, m.Anon)
	}
	for p := range r.cfg.changes {
		last, seen, ok := book.fanout(p)
		res.missed += r.n - seen
		if ok && seen == r.n {
			res.fanout = append(res.fanout, last)
		}
		res.each = append(res.each, book.each(p)...)
	}
	t.Logf("%s n=%d: each change's fan-out, slowest first (ms): %s", r.proxy, r.n, slowest(res.fanout))
	f.stop()
	deleteProbes(t, r.cs, probes)
	return res
}

// probeKeys maps what a proxy reports of a change to the change: the
// probe slice's "ns/name" (kubemark) and the service port it adds an
// endpoint to (switchyard).
type probeKeys struct {
	mu sync.Mutex
	m  map[string]int
}

func newProbeKeys() *probeKeys { return &probeKeys{m: map[string]int{}} }

func (k *probeKeys) add(p int, keys ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range keys {
		k.m[key] = p
	}
}

func (k *probeKeys) lookup(key string) (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.m[key]
	return p, ok
}

// writeProbes makes the changes one at a time: change p creates
// EndpointSlice probe-<proxy>-<n>-<p> with one new ready endpoint for a
// distinct background service, stamped with the write's time as its
// trigger time, then waits until every proxy saw it (or probeTimeout), and
// probeGap. It returns the slices' names.
func writeProbes(t *testing.T, r *run, f *fleet, book *probeBook, keys *probeKeys) []string {
	t.Helper()
	ctx := t.Context()
	var names []string
	for p := range r.cfg.changes {
		i := p * r.cfg.services / r.cfg.changes
		svc := framework.NewService(bgNS, bgName(i))
		s := framework.NewEndpointSlice(svc, fmt.Sprintf("probe-%s-%d-%d", r.proxy, r.n, p),
			[]discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, 8080)},
			framework.ReadyEndpoint(fmt.Sprintf("10.99.%d.%d", p/250, p%250+1), nodePrefix+"0"))
		keys.add(p, bgNS+"/"+s.Name, bgNS+"/"+svc.Name+":tcp")
		at := time.Now()
		framework.SetTriggerTime(s, at)
		book.wrote(p, at)
		if _, err := r.cs.DiscoveryV1().EndpointSlices(bgNS).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, s.Name)
		deadline := time.Now().Add(probeTimeout)
		for book.count(p) < r.n && time.Now().Before(deadline) {
			if err := f.alive(); err != nil {
				t.Fatal(err)
			}
			sleep(ctx, 5*time.Millisecond)
		}
		if book.count(p) < r.n {
			t.Logf("%s n=%d: change %d reached %d of %d proxies in %s", r.proxy, r.n, p, book.count(p), r.n, probeTimeout)
		}
		sleep(ctx, probeGap)
	}
	return names
}

func deleteProbes(t *testing.T, cs kubernetes.Interface, names []string) {
	t.Helper()
	for _, name := range names {
		if err := cs.DiscoveryV1().EndpointSlices(bgNS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting probe %s: %v", name, err)
		}
	}
}

func waitReady(t *testing.T, f *fleet) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		ok, err := f.allReady()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not every hollow proxy was ready within %s", f.proxy, readyTimeout)
		}
		sleep(t.Context(), 200*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func cpuOf(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := framework.ProcCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func cpuOfAll(t *testing.T, pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		sum += cpuOf(t, pid)
	}
	return sum
}

func watchMetrics(t *testing.T, cs kubernetes.Interface) watchTotals {
	t.Helper()
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	w, err := parseWatchTotals(string(body))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// slowest lists fan-outs in ms, slowest first.
func slowest(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.SortFunc(s, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatFloat(ms(d), 'f', 0, 64)
	}
	return strings.Join(parts, " ")
}
