//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// Knobs of TestScale; it is skipped unless SWITCHYARD_SCALE_SERVICES is set
// (creating 10k services takes 3-5 minutes here, so it is not part of
// `make test`; `make bench` runs it).
const (
	scaleServicesEnv  = "SWITCHYARD_SCALE_SERVICES"
	scaleEndpointsEnv = "SWITCHYARD_SCALE_ENDPOINTS"
	scaleChangesEnv   = "SWITCHYARD_SCALE_CHANGES"
	// Ports per Service (1 by default; the 44k workload has 2).
	scalePortsEnv = "SWITCHYARD_SCALE_PORTS"
	// Set to 1: switchyard runs with -v=4 and its "Sync trace" lines break
	// every change's latency down by phase.
	scaleTraceEnv = "SWITCHYARD_SCALE_TRACE"
	// Set to 1: each switchyard is then restarted over its own table, and
	// the restart's first sync and peak are reported.
	scaleRestartEnv = "SWITCHYARD_SCALE_RESTART"
	// A bound for switchyard's VmHWM in MB (unset: not checked).
	scalePeakEnv = "SWITCHYARD_SCALE_PEAK_MB"
	// "switchyard:nftables kube-proxy:nftables" by default; a switchyard
	// entry may name another binary, "switchyard@/path/to/bin:nftables",
	// or set environment variables, "switchyard+GOGC=50:nftables".
	scaleProxiesEnv = "SWITCHYARD_SCALE_PROXIES"
	// How the background services get into the apiserver: "api" creates
	// them through it, "etcd" writes them straight into its etcd (Service,
	// IPAddress and EndpointSlice as the apiserver stores them; cleanup
	// deletes them there too), since the apiserver's ClusterIP allocator
	// makes the API path O(n²). Unset: etcd above seedAutoAbove (20k)
	// services when the etcd is known (a private control plane, or
	// SWITCHYARD_ETCD_ENDPOINT), api otherwise. Everything measured still
	// goes through the API. (TestTakeover's background follows it too.)
	scaleSeedEnv = "SWITCHYARD_SCALE_SEED"
	// A directory: switchyard runs with --profiling, and its heap profile
	// (in-use after a forced GC) is saved there after the first sync, 30 s
	// after the changes and 5 s after a restart's first sync.
	scaleProfileEnv = "SWITCHYARD_SCALE_PROFILE"
	// "dual": the node, the Services (RequireDualStack) and the endpoints
	// are dual-stack: every background Service has an IPv4 and an IPv6
	// slice, changes alternate between them; "ipv6" makes them IPv6-only.
	// Default "ipv4". Dual-stack backgrounds go through the API (the etcd
	// seeder writes single-stack Services only).
	scaleFamilyEnv = "SWITCHYARD_SCALE_FAMILY"
)

// scaleTimeBox bounds a proxy's first sync; upstream's beyond it is
// reported as "> 10 min".
const scaleTimeBox = 10 * time.Minute

// scrapeTimeout bounds one read of a proxy's /metrics while waiting for
// its syncs.
const scrapeTimeout = time.Minute

// scaleResult is one proxy's row.
type scaleResult struct {
	name                     string
	firstSync                time.Duration
	peak, afterSync, settled int64
	settledAnon              int64
	restartSync              time.Duration
	burst                    burstResult
	restartPeak              int64
	answered                 int
	changes, news            []timedChange
}

// timedChange is one API write: when it began and returned, and its
// latency to the end of the sync that followed.
type timedChange struct {
	start, written time.Time
	latency        time.Duration
}

func latencies(cs []timedChange) []time.Duration {
	out := make([]time.Duration, len(cs))
	for i, c := range cs {
		out[i] = c.latency
	}
	return out
}

// TestScale holds N services × E endpoints in the real apiserver, then runs
// each proxy in turn over them on the same node, from an empty kernel: the
// real binary with the e2e flags, measured from its start to its first
// sync's last_timestamp; peak memory (VmHWM), RSS right after the first
// sync and 30 s later; how many services the kernel holds (elements of
// service-ips, or KUBE-SVC- chains); then one-endpoint changes and new
// services, each from the API write to the sync's last_timestamp.
func TestScale(t *testing.T) {
	n := envInt(t, scaleServicesEnv, 0)
	if n == 0 {
		t.Skipf("set %s (and %s, %s, %s) to run", scaleServicesEnv, scaleEndpointsEnv, scaleChangesEnv, scaleProxiesEnv)
	}
	eps, changes := envInt(t, scaleEndpointsEnv, 10), envInt(t, scaleChangesEnv, 20)
	ports := envInt(t, scalePortsEnv, 1)
	env := framework.Setup(t, suite, framework.TopologySpec{Pods: 1, Shape: scaleShape(t)})
	createBackground(t, env, n, eps, ports)
	proxies := strings.Fields(os.Getenv(scaleProxiesEnv))
	if len(proxies) == 0 {
		proxies = []string{"switchyard:nftables", "kube-proxy:nftables"}
	}
	cs := burstClient(t)
	var rows []scaleResult
	for _, p := range proxies {
		r := runScale(t, env, cs, p, n+len(rows)*changes, eps, ports, changes)
		rows = append(rows, r)
		reportScale(t, n, eps, ports, rows)
	}
}

// runScale measures one proxy; its new services are numbered from newBase.
func runScale(t *testing.T, env *framework.Env, cs kubernetes.Interface, proxy string, newBase, eps, ports, changes int) scaleResult {
	t.Helper()
	who, mode, _ := strings.Cut(proxy, ":")
	r := scaleResult{name: proxy}
	flushKernel(t, env)
	start := time.Now()
	args := []string{"--proxy-mode=" + mode}
	if os.Getenv(scaleTraceEnv) == "1" && who != "kube-proxy" {
		args = append(args, "-v=4")
	}
	if os.Getenv(scaleProfileEnv) != "" && who != "kube-proxy" {
		args = append(args, "--profiling")
	}
	d := startScaleProxy(t, env, who, args)
	defer func() { _ = d.Stop() }()
	ts, ok := waitTimestamp(t, d, 0, scaleTimeBox)
	if !ok {
		r.peak = memory(t, d.PID()).Peak
		if who == "kube-proxy" { // upstream is cut at the time box
			t.Logf("%s: no first sync in %s (VmHWM so far %.1f MB)", proxy, scaleTimeBox, mb(r.peak))
		} else {
			t.Errorf("%s: no first sync in %s\n%s", proxy, scaleTimeBox, d.LogTail(20))
		}
		return r
	}
	r.firstSync = time.Unix(0, int64(ts*1e9)).Sub(start)
	r.afterSync = memory(t, d.PID()).RSS
	logFirstTrace(t, proxy+" first sync", d, r.firstSync)
	saveScaleProfile(t, d, proxy, "first")
	r.answered = kernelServices(t, env, mode)
	if want := newBase * ports * len(env.Topo.Families()); r.answered < want {
		t.Errorf("%s: the kernel holds %d service ports, want at least %d", proxy, r.answered, want)
	}
	// The sync after a full one is paced by its cost (docs/sync-pacing.md);
	// measure changes once that is past, as in a running cluster.
	time.Sleep(5 * time.Second)
	for i := range changes {
		if c, ok := scaleChange(t, cs, env, d, i, newBase); ok {
			r.changes = append(r.changes, c)
		}
		if c, ok := scaleNewService(t, cs, env, d, newBase+i, eps, ports); ok {
			r.news = append(r.news, c)
		}
	}
	if b := envInt(t, scaleBurstEnv, 0); b > 0 && b <= newBase-changes {
		r.burst = scaleBurst(t, cs, env, d, changes, b, newBase)
	}
	time.Sleep(30 * time.Second)
	m := memory(t, d.PID())
	r.settled, r.settledAnon, r.peak = m.RSS, m.Anon, m.Peak
	saveScaleProfile(t, d, proxy, "settled")
	if limit := envInt(t, scalePeakEnv, 0); limit > 0 && who != "kube-proxy" && mb(r.peak) > float64(limit) {
		t.Errorf("%s: VmHWM %.1f MB, above %s=%d", proxy, mb(r.peak), scalePeakEnv, limit)
	}
	if os.Getenv(scaleTraceEnv) == "1" && who != "kube-proxy" {
		reportTrace(t, proxy, d, r)
	}
	if os.Getenv(scaleRestartEnv) == "1" && who != "kube-proxy" {
		_ = d.Stop()
		r.restartSync, r.restartPeak = restartScale(t, env, who, args)
	}
	return r
}

// startScaleProxy starts "kube-proxy", "switchyard", "switchyard@/bin"
// or "switchyard+NAME=VALUE+..." (the default binary with environment
// variables, e.g. GOGC=50).
func startScaleProxy(t *testing.T, env *framework.Env, who string, args []string) *framework.Daemon {
	if rest, ok := strings.CutPrefix(who, "switchyard+"); ok {
		return env.StartDaemonWithEnv(t, strings.Split(rest, "+"), args...)
	}
	switch {
	case who == "kube-proxy":
		return env.StartKubeProxy(t, args...)
	case strings.HasPrefix(who, "switchyard@"):
		return framework.StartDaemonIn(t, strings.TrimPrefix(who, "switchyard@"), env.Topo.NodeNS,
			append(framework.DefaultDaemonArgs(suite.DaemonKubeconfig, env.Topo.NodeName), args...)...)
	}
	return env.StartDaemon(t, args...)
}

// restartScale starts the proxy again over the rules it left and returns
// the time to its first sync and its peak memory 5 s after that sync.
func restartScale(t *testing.T, env *framework.Env, who string, args []string) (time.Duration, int64) {
	start := time.Now()
	d := startScaleProxy(t, env, who, args)
	defer func() { _ = d.Stop() }()
	ts, ok := waitTimestamp(t, d, 0, 10*time.Minute)
	if !ok {
		t.Errorf("%s: no first sync in 10 min after a restart\n%s", who, d.LogTail(20))
		return 0, 0
	}
	took := time.Unix(0, int64(ts*1e9)).Sub(start)
	logFirstTrace(t, who+" restart", d, took)
	time.Sleep(5 * time.Second)
	saveScaleProfile(t, d, who, "restart")
	return took, memory(t, d.PID()).Peak
}

// saveScaleProfile writes the daemon's heap profile to
// SWITCHYARD_SCALE_PROFILE/<proxy>-<when>.heap when that is set.
func saveScaleProfile(t *testing.T, d *framework.Daemon, proxy, when string) {
	dir := os.Getenv(scaleProfileEnv)
	if dir == "" || strings.HasPrefix(proxy, "kube-proxy") {
		return
	}
	name := strings.NewReplacer(":", "-", "/", "_").Replace(proxy) + "-" + when + ".heap"
	if err := writeHeapProfile(t, d, filepath.Join(dir, name)); err != nil {
		t.Error(err)
	}
}

// flushKernel leaves the node namespace without any proxy's rules.
func flushKernel(t *testing.T, env *framework.Env) {
	t.Helper()
	for _, cmd := range [][]string{{"nft", "flush", "ruleset"}, {"iptables-nft", "-t", "nat", "-F"}, {"iptables-nft", "-t", "filter", "-F"}} {
		_, _ = framework.RunIn(t.Context(), env.Topo.NodeNS, cmd...)
	}
}

// waitTimestamp waits for kubeproxy_sync_proxy_rules_last_timestamp_seconds
// to pass after, and returns it.
func waitTimestamp(t *testing.T, d *framework.Daemon, after float64, timeout time.Duration) (float64, bool) {
	var v float64
	err := framework.WaitFor(timeout, func() (bool, error) {
		var done bool
		v, done = syncedAfter(t, d, after)
		return done, nil
	})
	return v, err == nil
}

// syncedAfter reads the last sync's time of each family the proxy
// exports (kube-proxy a sample per family; sums would mean nothing). The
// first sync (after 0) is done when every family has synced; a change is
// applied when a family synced after it: kube-proxy's dual-stack proxy
// syncs only the family a slice belongs to, switchyard both in one sync.
func syncedAfter(t *testing.T, d *framework.Daemon, after float64) (float64, bool) {
	// The scrape's own bound, not the framework's 2 s default: in ipvs mode
	// a scrape reads the IPVS table (per-Service traffic), which at 4k
	// Services took longer than 2 s in the TCG VM and made a synced proxy
	// look unsynced.
	ctx, cancel := context.WithTimeout(t.Context(), scrapeTimeout)
	defer cancel()
	var last float64
	synced, families := 0, 0
	for _, f := range []string{"IPv4", "IPv6"} {
		v, err := d.MetricValue(ctx, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", map[string]string{"ip_family": f})
		if err != nil {
			continue // the family is not served
		}
		families++
		if v > after {
			synced++
			last = max(last, v)
		}
	}
	if after == 0 {
		return last, families > 0 && synced == families
	}
	return last, synced > 0
}

// scaleChange replaces endpoint 0 of background service i by an address
// unique to gen and returns the time from the write to the end of the sync
// that follows it.
func scaleChange(t *testing.T, cs kubernetes.Interface, env *framework.Env, d *framework.Daemon, i, gen int) (timedChange, bool) {
	slices := cs.DiscoveryV1().EndpointSlices(env.Namespace)
	// In a dual-stack run, changes alternate between the two families.
	fam := env.Topo.Families()[i%len(env.Topo.Families())]
	s, err := slices.Get(t.Context(), backgroundSliceName(i, fam), metav1.GetOptions{})
	if err != nil {
		t.Errorf("get slice: %v", err)
		return timedChange{}, false
	}
	s.Endpoints[0].Addresses = []string{backgroundAddr(fam, 251, gen, i)}
	return timedWrite(t, d, func() error {
		_, err := slices.Update(t.Context(), s, metav1.UpdateOptions{})
		return err
	})
}

// scaleNewService creates background service i with its slice.
func scaleNewService(t *testing.T, cs kubernetes.Interface, env *framework.Env, d *framework.Daemon, i, eps, ports int) (timedChange, bool) {
	return timedWrite(t, d, func() error { return createBackgroundService(t.Context(), cs, env, i, eps, ports) })
}

// timedWrite runs write, then waits for a sync that ends after it began.
func timedWrite(t *testing.T, d *framework.Daemon, write func() error) (timedChange, bool) {
	time.Sleep(200 * time.Millisecond) // let the previous sync's pacing pass
	c := timedChange{start: time.Now()}
	if err := write(); err != nil {
		t.Errorf("API write: %v", err)
		return c, false
	}
	c.written = time.Now()
	ts, ok := waitTimestamp(t, d, float64(c.start.UnixNano())/1e9, 10*time.Second)
	if !ok {
		t.Errorf("no sync within 10 s of an API write")
		return c, false
	}
	c.latency = time.Unix(0, int64(ts*1e9)).Sub(c.start)
	return c, true
}

// kernelServices counts the service ports the kernel holds for a mode,
// in every family of the topology.
func kernelServices(t *testing.T, env *framework.Env, mode string) int {
	n := 0
	for _, f := range env.Topo.Families() {
		nft, save := "ip", "iptables-nft-save"
		if f == corev1.IPv6Protocol {
			nft, save = "ip6", "ip6tables-nft-save"
		}
		if mode == "nftables" {
			out, err := framework.RunIn(t.Context(), env.Topo.NodeNS, "nft", "list", "map", nft, "kube-proxy", "service-ips")
			if err != nil {
				t.Errorf("nft list map: %v", err)
			}
			n += strings.Count(out, "goto ")
			continue
		}
		out, err := framework.RunIn(t.Context(), env.Topo.NodeNS, save, "-t", "nat")
		if err != nil {
			t.Errorf("%s: %v", save, err)
		}
		n += strings.Count(out, "\n:KUBE-SVC-")
	}
	return n
}

// scaleShape is the run's shape from SWITCHYARD_SCALE_FAMILY.
func scaleShape(t *testing.T) framework.Shape {
	v := os.Getenv(scaleFamilyEnv)
	if v == "" {
		return framework.ShapeIPv4
	}
	s, err := framework.ParseShape(v)
	if err != nil {
		t.Fatalf("%s: %v", scaleFamilyEnv, err)
	}
	return s
}

// memory reads a process's RSS and VmHWM.
func memory(t *testing.T, pid int) framework.Memory {
	m, err := framework.ReadMemory(pid)
	if err != nil {
		t.Error(err)
	}
	return m
}

func reportScale(t *testing.T, n, eps, ports int, rows []scaleResult) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d services × %d endpoints × %d ports\n| proxy | first sync | one-endpoint change p50 / p99 | new service p50 | VmHWM | RSS after sync / +30 s (anonymous) | service ports in the kernel |\n|---|---|---|---|---|---|---|\n", n, eps, ports)
	for _, r := range rows {
		if r.firstSync == 0 {
			fmt.Fprintf(&b, "| %s | > %s | | | > %.1f MB | | |\n", r.name, scaleTimeBox, mb(r.peak))
			continue
		}
		ch, news := latencies(r.changes), latencies(r.news)
		fmt.Fprintf(&b, "| %s | %s | %s / %s | %s | %.1f MB | %.1f / %.1f (%.1f) MB | %d |\n", r.name, secs(r.firstSync),
			percentile(ch, 50), percentile(ch, 99), percentile(news, 50), mb(r.peak), mb(r.afterSync), mb(r.settled), mb(r.settledAnon), r.answered)
		if bu := r.burst; bu.updates > 0 {
			lat := "not traced | -"
			if len(bu.latencies) > 0 {
				lat = fmt.Sprintf("%d syncs | %s / %s (update -> synced, p50 / p99)", bu.syncs, percentile(bu.latencies, 50), percentile(bu.latencies, 99))
			}
			fmt.Fprintf(&b, "| %s, %d EndpointSlice updates over %s | %s | | %.0f %% of one core | | |\n",
				r.name, bu.updates, burstSpan, lat, 100*bu.cpuShare)
		}
		if r.restartSync > 0 {
			fmt.Fprintf(&b, "| %s, restarted over its rules | %s | | | %.1f MB | | |\n", r.name, secs(r.restartSync), mb(r.restartPeak))
		}
	}
	t.Log(b.String())
}

func percentile(ds []time.Duration, p int) string {
	v, ok := nth(ds, p)
	if !ok {
		return "-"
	}
	return v.Round(time.Millisecond).String()
}

// nth is the p-th percentile of ds (nearest rank); false when ds is empty.
func nth(ds []time.Duration, p int) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(i, len(s))-1)], true
}

func mb(b int64) float64 { return float64(b) / 1e6 }
