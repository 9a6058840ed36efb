//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// burstWorkers create and delete objects in parallel, as a controller
// storm would.
const burstWorkers = 16

// testServiceBurst creates SWITCHYARD_FAULT_SERVICES (default 2000)
// Services, each with a one-endpoint EndpointSlice, in a burst, deletes
// them all, and does it again. Once the deletions are applied the daemon's
// goroutines and pending-change gauges are back where they started, and
// the second burst leaves no more memory behind than the first (no leak).
// RSS (VmRSS) after the bursts is compared with the start, both taken
// after the same idle time (idleFor of periodic syncs and scrapes), and
// reported against the 20% target, not asserted: a Go process's
// RSS swings with its collector's cycle.
func testServiceBurst(t *testing.T) {
	n := envInt(t, servicesEnv, 2000)
	m := startMode(t, "iptables", 1, "--profiling")
	pod := m.Topo.Pods[0]
	base := m.EchoService(t, "base", pod)
	waitServed(t, m.Topo.ClientNS, "tcp", hostPort(base.Spec.ClusterIP, 80), []string{pod.Name}, true)
	time.Sleep(5 * time.Second)
	t.Logf("just started: %s", daemonFigures(t, m))
	start := idle(t, m, "before the bursts")
	saveHeapProfile(t, m, "start")
	cs := burstClient(t)
	var after [2]figures
	for round := range after {
		burst(t, cs, m, n, start.rules)
		time.Sleep(burstSettle)
		after[round] = daemonFigures(t, m)
		t.Logf("%s after the deletions of burst %d: %s", burstSettle, round+1, after[round])
		saveHeapProfile(t, m, fmt.Sprintf("after-burst-%d", round+1))
		if after[round].pending != 0 || after[round].goroutines > start.goroutines+2 {
			t.Errorf("burst %d: pending changes or goroutines did not return: start %s, now %s", round+1, start, after[round])
		}
	}
	if grew := float64(after[1].rss) - float64(after[0].rss); grew > 0.2*float64(after[0].rss) {
		t.Errorf("RSS grew by %.1f MiB from the first burst to the second: a leak?", mib(grew))
	}
	end := idle(t, m, "after the bursts")
	saveHeapProfile(t, m, "end")
	verdict := "within"
	if float64(end.rss) > 1.2*float64(start.rss) {
		verdict = "ABOVE"
	}
	t.Logf("RSS after %v idle: %.1f MiB before the bursts, %.1f MiB after = %+.0f%% (%s the 20%% target); anon %.1f -> %.1f MiB, heap allocated %+.1f MiB",
		idleFor, mib(float64(start.rss)), mib(float64(end.rss)), pct(float64(end.rss), float64(start.rss)), verdict,
		mib(float64(start.anon)), mib(float64(end.anon)), mib(end.heap-start.heap))
}

// idleFor is how long the daemon idles (periodic syncs, metrics scrapes)
// before the figures that start and end the test are taken. A
// just-started Go process has not yet grown its heap to the collector's
// goal (about twice the live heap), so both ends are measured after the
// same idle time; the just-started figures are logged too.
const idleFor = 90 * time.Second

// idle waits idleFor, logging the figures every 15 s, and returns the
// last ones.
func idle(t *testing.T, m *modeEnv, when string) figures {
	t.Helper()
	deadline := time.Now().Add(idleFor)
	for {
		time.Sleep(15 * time.Second)
		f := daemonFigures(t, m)
		if !time.Now().Before(deadline) {
			t.Logf("%s, idle for %v: %s", when, idleFor, f)
			return f
		}
		t.Logf("%s, idling: RSS %.1f MiB (anon %.1f), heap allocated %.1f MiB", when, mib(float64(f.rss)), mib(float64(f.anon)), mib(f.heap))
	}
}

// burstSettle is how long after the deletions the figures of a burst are
// taken: both bursts are measured alike.
const burstSettle = 20 * time.Second

// burst creates n services with slices, waits until they are programmed,
// deletes them and waits until KUBE-SERVICES is back to baseRules.
func burst(t *testing.T, cs kubernetes.Interface, m *modeEnv, n, baseRules int) {
	t.Helper()
	t0 := time.Now()
	parallel(t, n, func(i int) error { return createBurstService(t.Context(), cs, m, i) })
	created := time.Since(t0)
	waitRules(t, m, baseRules+n)
	peak := daemonFigures(t, m)
	t.Logf("%d services + slices created in %s, programmed %s after the first create: %s", n, secs(created), secs(time.Since(t0)), peak)
	t1 := time.Now()
	parallel(t, n, func(i int) error { return deleteBurstService(t.Context(), cs, m, i) })
	deleted := time.Since(t1)
	waitRules(t, m, baseRules)
	t.Logf("deleted in %s, applied %s after the first delete", secs(deleted), secs(time.Since(t1)))
}

func pct(v, base float64) float64 { return 100 * (v/base - 1) }

type figures struct {
	rss        int64
	anon, file int64   // RssAnon and RssFile: the process's own pages, its binary's
	heap       float64 // go_memstats_alloc_bytes: live heap once a GC ran
	released   float64 // go_memstats_heap_released_bytes: returned to the OS
	nextGC     float64 // go_memstats_next_gc_bytes: the collector's heap goal
	goroutines float64
	pending    float64
	rules      int
}

func (f figures) String() string {
	return fmt.Sprintf("RSS %.1f MiB (anon %.1f, file %.1f; heap allocated %.1f MiB, GC goal %.1f MiB, released to the OS %.1f MiB), %v goroutines, %v pending changes, %d KUBE-SERVICES rules",
		mib(float64(f.rss)), mib(float64(f.anon)), mib(float64(f.file)), mib(f.heap), mib(f.nextGC), mib(f.released), f.goroutines, f.pending, f.rules)
}

func mib(b float64) float64 { return b / (1 << 20) }

func daemonFigures(t *testing.T, m *modeEnv) figures {
	t.Helper()
	mem, err := framework.ReadMemory(m.daemon.PID())
	if err != nil {
		t.Fatal(err)
	}
	f := figures{rss: mem.RSS, anon: mem.Anon, file: mem.File, goroutines: metric(t, m.daemon, "go_goroutines"),
		heap: metric(t, m.daemon, "go_memstats_alloc_bytes"), released: metric(t, m.daemon, "go_memstats_heap_released_bytes"),
		nextGC: metric(t, m.daemon, "go_memstats_next_gc_bytes")}
	f.pending = metric(t, m.daemon, "kubeproxy_sync_proxy_rules_service_changes_pending") +
		metric(t, m.daemon, "kubeproxy_sync_proxy_rules_endpoint_changes_pending")
	f.rules = len(chainRules(t.Context(), m.Env, "iptables", "nat", "KUBE-SERVICES"))
	return f
}

// profilesEnv names a directory that receives the daemon's heap profiles
// (start, after each burst, end) for `go tool pprof`.
const profilesEnv = "SWITCHYARD_BURST_PROFILES"

func saveHeapProfile(t *testing.T, m *modeEnv, name string) {
	t.Helper()
	if dir := os.Getenv(profilesEnv); dir != "" {
		if err := writeHeapProfile(t, m.daemon, filepath.Join(dir, name+".pb.gz")); err != nil {
			t.Fatal(err)
		}
	}
}

// writeHeapProfile saves a daemon's in-use heap profile (after a forced
// GC; the daemon runs with --profiling) to path.
func writeHeapProfile(t *testing.T, d *framework.Daemon, path string) error {
	code, body, err := d.Get(t.Context(), d.MetricsAddr, "/debug/pprof/heap?gc=1")
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("heap profile: HTTP %d, %v", code, err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return err
	}
	t.Logf("heap profile %s", path)
	return nil
}

// burstClient is an admin client without client-side rate limiting.
func burstClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := *suite.Cluster.Config
	cfg.QPS, cfg.Burst = 2000, 4000
	// Protobuf, as the daemons use: tens of thousands of writes cost the
	// apiserver less to decode and answer.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func burstName(i int) string { return fmt.Sprintf("burst-%05d", i) }

func createBurstService(ctx context.Context, cs kubernetes.Interface, m *modeEnv, i int) error {
	svc := framework.NewService(m.Namespace, burstName(i), framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc, err := cs.CoreV1().Services(m.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	s := framework.NewEndpointSlice(svc, "1", echoPorts()[:1], framework.PodEndpoints(m.Topo.NodeName, m.Topo.Pods[0])...)
	_, err = cs.DiscoveryV1().EndpointSlices(m.Namespace).Create(ctx, s, metav1.CreateOptions{})
	return err
}

func deleteBurstService(ctx context.Context, cs kubernetes.Interface, m *modeEnv, i int) error {
	if err := cs.DiscoveryV1().EndpointSlices(m.Namespace).Delete(ctx, burstName(i)+"-1", metav1.DeleteOptions{}); err != nil {
		return err
	}
	return cs.CoreV1().Services(m.Namespace).Delete(ctx, burstName(i), metav1.DeleteOptions{})
}

// parallel runs fn(0..n-1) on burstWorkers goroutines; the first error
// fails the test.
func parallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	if err := framework.Parallel(n, burstWorkers, fn); err != nil {
		t.Fatal(err)
	}
}

func waitRules(t *testing.T, m *modeEnv, want int) {
	t.Helper()
	var got int
	err := framework.WaitFor(5*time.Minute, func() (bool, error) {
		got = len(chainRules(t.Context(), m.Env, "iptables", "nat", "KUBE-SERVICES"))
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("KUBE-SERVICES has %d rules, want %d: %v", got, want, err)
	}
}
