//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
)

// Knobs of TestConntrackScale (make conntrack-scale ENTRIES=...); it is
// skipped unless the entry count is set.
const (
	ctEntriesEnv = "SWITCHYARD_CONNTRACK_ENTRIES"
	// "switchyard kube-proxy" by default.
	ctProxiesEnv = "SWITCHYARD_CONNTRACK_PROXIES"
	// How long a proxy may take to delete the stale entries (default 5m).
	ctPatienceEnv = "SWITCHYARD_CONNTRACK_PATIENCE"
	// "ipv4" (the default) or "ipv6": the family of the whole run (the
	// node, the Services, the synthetic entries and the real flow).
	ctFamilyEnv = "SWITCHYARD_CONNTRACK_FAMILY"
)

// The synthetic services: ctServices ClusterIP services of ctEndpoints
// endpoints each; endpoint 0 of the first ctShrunk leaves.
const (
	ctServices  = 20
	ctEndpoints = 10
	ctShrunk    = 3
	// ctLife outlives the run: the kernel expires nothing by itself.
	ctLife = time.Hour
	// ctSample is how often RSS and the events are read during cleanup.
	ctSample = 50 * time.Millisecond
)

// ctRow is one proxy's result.
type ctRow struct {
	proxy                    string
	shape                    framework.Shape
	entries, stale           int
	fill, dump, walk, udp    time.Duration
	cleanup                  time.Duration
	firstEndpoint            time.Duration // the first removed endpoint clean
	stalePer                 map[int]int   // stale entries per shrunk service
	done                     bool
	rssBefore, peakRSS, hwm  int64
	cpu                      time.Duration
	wronglyDeleted, leftOver int
	foreignDeleted           int
	liveMoved                time.Duration
	eventsLost               bool
	passes                   []string // switchyard's own timing of its passes
	portDumps                []string // IPv6: what a pass per port is sent
}

// TestConntrackScale fills a node namespace's conntrack table with
// SWITCHYARD_CONNTRACK_ENTRIES entries (framework.CTMix: TCP and UDP to
// 20 synthetic services NATed to their endpoints, and to other
// addresses; all IPv4, or all IPv6 with SWITCHYARD_CONNTRACK_FAMILY=ipv6),
// inserted through netlink in bulk, plus one real UDP flow
// from the client namespace through a real Service to a real pod. Then
// it removes UDP endpoints through the API (endpoint 0 of 3 synthetic
// services, and the pod the real flow goes to) and measures, for each
// proxy in turn (each in a node namespace and table of its own): the
// time from the API writes until the last stale entry's destroy event,
// the proxy's peak RSS (sampled every 50 ms) and CPU during the cleanup,
// every entry of the mix deleted that should have stayed (destroy
// events, then a full dump), and when the real flow moved to the
// remaining pod.
func TestConntrackScale(t *testing.T) {
	n := envInt(t, ctEntriesEnv, 0)
	if n == 0 {
		t.Skipf("set %s (make conntrack-scale ENTRIES=...) to run", ctEntriesEnv)
	}
	checkConntrackMax(t, n)
	shape := ctShape(t)
	proxies := strings.Fields(os.Getenv(ctProxiesEnv))
	if len(proxies) == 0 {
		proxies = []string{"switchyard", "kube-proxy"}
	}
	patience := 5 * time.Minute
	if v := os.Getenv(ctPatienceEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", ctPatienceEnv, v, err)
		}
		patience = d
	}
	var rows []ctRow
	for _, p := range proxies {
		t.Run(p, func(t *testing.T) {
			rows = append(rows, runConntrackScale(t, p, shape, n, patience))
		})
	}
	reportConntrackScale(t, rows)
}

// ctShape is the run's shape from SWITCHYARD_CONNTRACK_FAMILY: IPv4-only
// or IPv6-only (dual is refused: the mix, and so what is measured, is of
// one family).
func ctShape(t *testing.T) framework.Shape {
	v := os.Getenv(ctFamilyEnv)
	if v == "" {
		return framework.ShapeIPv4
	}
	s, err := framework.ParseShape(v)
	if err != nil || s == framework.ShapeDual {
		t.Fatalf("%s=%q: want ipv4 or ipv6", ctFamilyEnv, v)
	}
	return s
}

// checkConntrackMax: nf_conntrack_max is machine-wide and read-only in a
// network namespace; the make target raises it (and restores it).
func checkConntrackMax(t *testing.T, n int) {
	b, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if max < n+n/10+1000 {
		t.Fatalf("net.netfilter.nf_conntrack_max is %d, too small for %d entries: run through make conntrack-scale, "+
			"which raises it for the run and restores it", max, n)
	}
}

func runConntrackScale(t *testing.T, proxy string, shape framework.Shape, n int, patience time.Duration) ctRow {
	env := framework.Setup(t, suite, framework.TopologySpec{Pods: 2, Shape: shape})
	mix := &framework.CTMix{Entries: n}
	for s := range ctServices {
		mix.Services = append(mix.Services, createCTService(t, env, s))
	}
	live := env.EchoService(t, "live", env.Topo.Pods...)
	d := startConntrackProxy(t, env, proxy)
	row := ctRow{proxy: proxy, shape: shape, entries: n, stalePer: map[int]int{}}

	stream := startLiveStream(t, env, live)
	defer stream.Stop()
	dead, alive := liveServer(t, stream, env.Topo.Pods)

	watch, err := framework.WatchConntrack(env.Topo.NodeNS, mix)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	fillConntrack(t, env, mix, &row)
	if mix.Family() == corev1.IPv6Protocol {
		dumpShrunkPorts(t, env, mix, &row)
	}
	waitQuiet(t, d, proxy)
	watch.Reset()

	stale := framework.NewCTBits(n)
	for i := range n {
		if c, s, e := mix.Where(i); c == framework.CTUDPService && s < ctShrunk && e == 0 {
			stale.Set(i)
			row.stalePer[s]++
			row.stale++
		}
	}
	mem, err := framework.ReadMemory(d.PID())
	if err != nil {
		t.Fatal(err)
	}
	row.rssBefore = mem.RSS
	cpu0, err := framework.ProcCPU(d.PID())
	if err != nil {
		t.Fatal(err)
	}

	logAt := d.LogSize()
	// The writes go out together: on a loaded machine one after the other
	// they took seconds, which the cleanup time would include.
	t0 := time.Now()
	var wg sync.WaitGroup
	for s := range ctShrunk {
		wg.Go(func() { setCTEndpoints(t, env, s, 1) })
	}
	wg.Go(func() { setLiveEndpoint(t, env, live, alive) })
	wg.Wait()
	t.Logf("API writes done %v after the first began", time.Since(t0).Round(time.Millisecond))
	watchCleanup(t, d, watch, env.Topo.NodeNS, mix, stale, t0, patience, &row)
	cpu1, err := framework.ProcCPU(d.PID())
	if err != nil {
		t.Fatal(err)
	}
	row.cpu = cpu1 - cpu0
	if mem, err = framework.ReadMemory(d.PID()); err == nil {
		row.hwm = mem.Peak
	}
	row.passes = passTimes(d, logAt)
	logSyncs(t, d, logAt)
	verifyAfter(t, env, mix, stale, &row)
	row.liveMoved = liveMoved(t, stream, t0, dead, alive)
	return row
}

// createCTService creates synthetic service s in the topology's family:
// ports TCP 80 and UDP framework.CTUDPPort(s) (53 or a port of its own),
// endpoints that do not exist (framework.CTEndpointIP).
func createCTService(t *testing.T, env *framework.Env, s int) framework.CTService {
	svc := env.CreateService(t, framework.NewService(env.Namespace, ctServiceName(s),
		framework.NewServicePort("tcp", corev1.ProtocolTCP, framework.CTTCPPort, framework.CTTCPEndpoint),
		framework.NewServicePort("udp", corev1.ProtocolUDP, int32(framework.CTUDPPort(s)), framework.CTUDPEndpoint)))
	f := ctFamily(env)
	ip, err := netip.ParseAddr(framework.ClusterIPOf(svc, f))
	if err != nil {
		t.Fatalf("service %s has no %s cluster IP: %v", svc.Name, f, svc.Spec.ClusterIPs)
	}
	out := framework.CTService{IP: ip}
	for e := range ctEndpoints {
		out.Endpoints = append(out.Endpoints, framework.CTEndpointIP(f, s, e))
	}
	env.CreateFamilySlices(t, svc, "1", ctEndpointPorts(), func(corev1.IPFamily) []discoveryv1.Endpoint {
		return ctEndpointsFrom(env, s, 0)
	})
	return out
}

func ctServiceName(s int) string { return fmt.Sprintf("ct-%d", s) }

// ctSliceName names synthetic service s's EndpointSlice (as
// CreateFamilySlices did).
func ctSliceName(env *framework.Env, s int) string {
	return env.SliceName(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ctServiceName(s)}}, "1", ctFamily(env))
}

// ctFamily is the run's one family.
func ctFamily(env *framework.Env) corev1.IPFamily { return env.Topo.Families()[0] }

func ctEndpointPorts() []discoveryv1.EndpointPort {
	return []discoveryv1.EndpointPort{
		framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.CTTCPEndpoint),
		framework.NewEndpointPort("udp", corev1.ProtocolUDP, framework.CTUDPEndpoint),
	}
}

// ctEndpointsFrom are endpoints first.. of synthetic service s.
func ctEndpointsFrom(env *framework.Env, s, first int) []discoveryv1.Endpoint {
	var eps []discoveryv1.Endpoint
	for e := first; e < ctEndpoints; e++ {
		eps = append(eps, framework.ReadyEndpoint(framework.CTEndpointIP(ctFamily(env), s, e).String(), env.Topo.NodeName))
	}
	return eps
}

// setCTEndpoints makes endpoints first.. the endpoints of service s.
func setCTEndpoints(t *testing.T, env *framework.Env, s, first int) {
	slices := suite.Cluster.Client.DiscoveryV1().EndpointSlices(env.Namespace)
	sl, err := slices.Get(t.Context(), ctSliceName(env, s), metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	sl.Endpoints = ctEndpointsFrom(env, s, first)
	framework.SetTriggerTime(sl, time.Now())
	if _, err := slices.Update(t.Context(), sl, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

func setLiveEndpoint(t *testing.T, env *framework.Env, svc *corev1.Service, pod framework.Pod) {
	slices := suite.Cluster.Client.DiscoveryV1().EndpointSlices(env.Namespace)
	sl, err := slices.Get(t.Context(), env.SliceName(svc, "1", ctFamily(env)), metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	sl.Endpoints = framework.PodEndpointsOf(ctFamily(env), env.Topo.NodeName, pod)
	framework.SetTriggerTime(sl, time.Now())
	if _, err := slices.Update(t.Context(), sl, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

func startConntrackProxy(t *testing.T, env *framework.Env, proxy string) *framework.Daemon {
	var d *framework.Daemon
	switch proxy {
	case "switchyard":
		d = env.StartDaemon(t)
	case "kube-proxy":
		d = env.StartKubeProxy(t)
	default:
		t.Fatalf("proxy %q: want switchyard or kube-proxy", proxy)
	}
	if _, ok := waitTimestamp(t, d, 0, 2*time.Minute); !ok {
		t.Fatalf("%s: no first sync in 2 min\n%s", proxy, d.LogTail(30))
	}
	return d
}

// startLiveStream sends a request every 50 ms from one UDP socket of the
// client namespace to the live Service, until answers come.
func startLiveStream(t *testing.T, env *framework.Env, svc *corev1.Service) *framework.EchoStream {
	addr := hostPort(framework.ClusterIPOf(svc, ctFamily(env)), 80)
	s, err := framework.StartEchoStream(env.Topo.ClientNS, "udp", addr, ctSample, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(converge, func() (bool, error) {
		r := s.Results()
		if len(r) < 5 {
			return false, nil
		}
		for _, x := range r[len(r)-5:] {
			if x.Err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		s.Stop()
		t.Fatalf("the UDP stream to %s is not answered: %v", addr, err)
	}
	return s
}

// liveServer returns the pod the stream's flow is NATed to and the other.
func liveServer(t *testing.T, s *framework.EchoStream, pods []framework.Pod) (dead, alive framework.Pod) {
	r := s.Results()
	name := r[len(r)-1].Server
	for i, p := range pods {
		if p.Name == name {
			return p, pods[1-i]
		}
	}
	t.Fatalf("the stream is answered by %q, not a pod of %v", name, pods)
	return
}

// liveMoved is how long after t0 the stream was first answered by alive
// (and never by dead after that); 0 if it was not.
func liveMoved(t *testing.T, s *framework.EchoStream, t0 time.Time, dead, alive framework.Pod) time.Duration {
	var moved time.Time
	for _, r := range s.Results() {
		switch {
		case r.At.Before(t0):
		case r.Server == alive.Name && moved.IsZero():
			moved = r.At
		case r.Server == dead.Name && !moved.IsZero():
			t.Errorf("the live flow went back to %s at %v", dead.Name, r.At.Sub(t0))
		}
	}
	if moved.IsZero() {
		t.Errorf("the live UDP flow never moved from %s to %s", dead.Name, alive.Name)
		return 0
	}
	return moved.Sub(t0)
}

// fillConntrack inserts the mix and checks, with a full dump, that every
// entry is there; it times the fill, the dump and two kernel-filtered
// dumps: one matching nothing (the kernel's walk of the table alone: UDP
// to port 1, which no entry has) and one of the UDP entries.
func fillConntrack(t *testing.T, env *framework.Env, mix *framework.CTMix, row *ctRow) {
	start := time.Now()
	failed, err := framework.FillConntrack(env.Topo.NodeNS, mix, ctLife)
	if err != nil {
		t.Fatal(err)
	}
	row.fill = time.Since(start)
	if len(failed) > 0 {
		t.Fatalf("the kernel refused entries: %v", failed)
	}
	start = time.Now()
	present, foreign, err := framework.ScanConntrack(env.Topo.NodeNS, mix, ctnetlink.Filter{})
	row.dump = time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	for i := range mix.Entries {
		if !present.Has(i) {
			t.Fatalf("entry %d is missing after the fill", i)
		}
	}
	none := ctnetlink.Filter{Proto: ctnetlink.UDP, OrigDst: netip.MustParseAddrPort("0.0.0.1:1")}
	if mix.Family() == corev1.IPv6Protocol {
		none.OrigDst = netip.MustParseAddrPort("[::1]:1") // the kernel compares the port alone
	}
	start = time.Now()
	if _, _, err := framework.ScanConntrack(env.Topo.NodeNS, mix, none); err != nil {
		t.Fatal(err)
	}
	row.walk = time.Since(start)
	start = time.Now()
	if _, _, err := framework.ScanConntrack(env.Topo.NodeNS, mix, ctnetlink.Filter{Proto: ctnetlink.UDP}); err != nil {
		t.Fatal(err)
	}
	row.udp = time.Since(start)
	t.Logf("%d entries in %v (%.0f/s), %d others; full dump %v, UDP only %v, kernel walk alone %v",
		mix.Entries, row.fill.Round(time.Millisecond), float64(mix.Entries)/row.fill.Seconds(), foreign,
		row.dump.Round(time.Millisecond), row.udp.Round(time.Millisecond), row.walk.Round(time.Millisecond))
}

// dumpShrunkPorts makes, before the measurement, the kernel-filtered
// dumps a targeted IPv6 pass for the shrunk services makes (one per UDP
// port, the kernel comparing no address) and records what each was sent:
// every synthetic service's entries on the port, where an IPv4 pass is
// sent one address's.
func dumpShrunkPorts(t *testing.T, env *framework.Env, mix *framework.CTMix, row *ctRow) {
	seen := map[uint16]bool{}
	for s := range ctShrunk {
		port := framework.CTUDPPort(s)
		if seen[port] {
			continue
		}
		seen[port] = true
		f := ctnetlink.Filter{Proto: ctnetlink.UDP, OrigDst: netip.AddrPortFrom(mix.Services[s].IP, port)}
		start := time.Now()
		present, foreign, err := framework.ScanConntrack(env.Topo.NodeNS, mix, f)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		sent, own := 0, 0
		for i := range mix.Entries {
			if !present.Has(i) {
				continue
			}
			sent++
			if c, svc, _ := mix.Where(i); c == framework.CTUDPService && svc == s {
				own++
			}
		}
		line := fmt.Sprintf("UDP/%d %d sent in %s (%d of %s, %d of other Services on the port", port, sent+foreign, secs(took),
			own, ctServiceName(s), sent-own)
		if foreign > 0 {
			line += fmt.Sprintf(", %d not of the mix", foreign)
		}
		row.portDumps = append(row.portDumps, line+")")
	}
}

// waitQuiet waits (up to a minute) until the proxy used no CPU for a
// second: whatever it did about the fill is over.
func waitQuiet(t *testing.T, d *framework.Daemon, proxy string) {
	prev, _ := framework.ProcCPU(d.PID())
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		cpu, err := framework.ProcCPU(d.PID())
		if err != nil {
			t.Fatal(err)
		}
		if cpu == prev {
			return
		}
		prev = cpu
	}
	t.Logf("%s kept using CPU for a minute after the fill; measuring anyway", proxy)
}

// watchCleanup samples the proxy's RSS and the destroy events until
// every stale entry is gone (or patience runs out).
func watchCleanup(t *testing.T, d *framework.Daemon, w *framework.CTWatch, ns string, mix *framework.CTMix,
	stale framework.CTBits, t0 time.Time, patience time.Duration, row *ctRow) {
	tick := time.NewTicker(ctSample)
	defer tick.Stop()
	var last time.Time
	for {
		if mem, err := framework.ReadMemory(d.PID()); err == nil {
			row.peakRSS = max(row.peakRSS, mem.RSS)
		}
		events, foreign, err := w.Events()
		if err != nil {
			row.eventsLost = true
			t.Logf("destroy events: %v; polling UDP dumps instead (once a second)", err)
			pollCleanup(t, ns, mix, stale, t0, patience, row)
			return
		}
		gone, wrong := 0, 0
		perService := map[int]int{}
		lastOf := map[int]time.Time{}
		for _, e := range events {
			if stale.Has(e.Index) {
				gone++
				last = e.At
				_, s, _ := mix.Where(e.Index)
				perService[s]++
				lastOf[s] = e.At
			} else {
				wrong++
			}
		}
		row.wronglyDeleted, row.foreignDeleted = wrong, foreign
		// The first removed endpoint whose stale entries are all gone.
		for s, n := range perService {
			if n == row.stalePer[s] && (row.firstEndpoint == 0 || lastOf[s].Sub(t0) < row.firstEndpoint) {
				row.firstEndpoint = lastOf[s].Sub(t0)
			}
		}
		if gone == row.stale {
			row.cleanup, row.done = last.Sub(t0), true
			// A second more of samples: late deletes and the memory
			// the pass leaves.
			if time.Since(last) > time.Second {
				return
			}
		}
		if time.Since(t0) > patience {
			t.Errorf("%s: %d of %d stale entries deleted after %v\n%s", row.proxy, gone, row.stale, patience, d.LogTail(20))
			return
		}
		<-tick.C
	}
}

// pollCleanup dumps the UDP entries once a second until no stale one is
// left: coarser than the events, and the dumps load the machine.
func pollCleanup(t *testing.T, ns string, mix *framework.CTMix, stale framework.CTBits, t0 time.Time,
	patience time.Duration, row *ctRow) {
	for time.Since(t0) < patience {
		at := time.Now()
		present, _, err := framework.ScanConntrack(ns, mix, ctnetlink.Filter{Proto: ctnetlink.UDP})
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for i := range mix.Entries {
			if stale.Has(i) && present.Has(i) {
				left++
			}
		}
		if left == 0 {
			row.cleanup, row.done = at.Sub(t0), true
			return
		}
		time.Sleep(time.Second)
	}
}

// passTimes are the elapsed times switchyard logged for its cleanup
// passes since the log offset ("Cleaned conntrack entries", at -v=2 for
// a pass that deleted something).
func passTimes(d *framework.Daemon, offset int64) []string {
	text, err := d.LogFrom(offset)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, `"Cleaned conntrack entries"`) {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s deleted, %s)", logValue(line, "elapsed"), logValue(line, "deleted"), logValue(line, "scope")))
	}
	return out
}

// logValue is the value of key=value (or key="value") in a klog line.
func logValue(line, key string) string {
	_, v, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return "?"
	}
	if rest, ok := strings.CutPrefix(v, `"`); ok {
		v, _, _ = strings.Cut(rest, `"`)
		return v
	}
	v, _, _ = strings.Cut(v, " ")
	return v
}

// logSyncs logs the proxy's lines about syncs and conntrack since the
// offset.
func logSyncs(t *testing.T, d *framework.Daemon, offset int64) {
	text, err := d.LogFrom(offset)
	if err != nil {
		return
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "Synced") || strings.Contains(strings.ToLower(line), "conntrack") {
			t.Log(line)
		}
	}
}

// verifyAfter dumps the table: every entry of the mix that is not stale
// must be there, no stale one.
func verifyAfter(t *testing.T, env *framework.Env, mix *framework.CTMix, stale framework.CTBits, row *ctRow) {
	present, _, err := framework.ScanConntrack(env.Topo.NodeNS, mix, ctnetlink.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	missing, left := 0, 0
	for i := range mix.Entries {
		switch {
		case stale.Has(i) && present.Has(i):
			left++
		case !stale.Has(i) && !present.Has(i):
			missing++
		}
	}
	if missing != row.wronglyDeleted && !row.eventsLost {
		t.Logf("the dump misses %d entries that should stay, the events said %d", missing, row.wronglyDeleted)
	}
	row.wronglyDeleted, row.leftOver = missing, left
	if missing > 0 {
		t.Errorf("%s deleted %d entries that were not stale", row.proxy, missing)
	}
	if left > 0 {
		t.Errorf("%s left %d of %d stale entries", row.proxy, left, row.stale)
	}
}

func reportConntrackScale(t *testing.T, rows []ctRow) {
	var b strings.Builder
	if len(rows) > 0 && rows[0].shape == framework.ShapeIPv6 {
		fmt.Fprintf(&b, "\nIPv6-only node, Services, synthetic entries and real flow (%s=ipv6)\n", ctFamilyEnv)
	}
	fmt.Fprintf(&b, "\n| proxy | entries | stale | cleanup | first endpoint clean | peak RSS during cleanup | RSS before | CPU during cleanup | wrongly deleted | stale left | live UDP flow moved after |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		cleanup := secs(r.cleanup)
		if !r.done {
			cleanup = "not done"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %d MB | %d MB | %s | %d | %d | %s |\n", r.proxy, r.entries, r.stale, cleanup,
			secs(r.firstEndpoint), r.peakRSS>>20, r.rssBefore>>20, secs(r.cpu), r.wronglyDeleted, r.leftOver, secs(r.liveMoved))
	}
	for _, r := range rows {
		if len(r.passes) > 0 {
			fmt.Fprintf(&b, "\n%s's own pass times: %s", r.proxy, strings.Join(r.passes, ", "))
		}
	}
	for _, r := range rows {
		if len(r.portDumps) > 0 {
			fmt.Fprintf(&b, "\n%s's table, a dump per UDP port of the shrunk Services (an IPv6 pass's kernel filter): %s",
				r.proxy, strings.Join(r.portDumps, "; "))
		}
	}
	fmt.Fprintf(&b, "\n\n| node namespace of | fill | harness's full dump | UDP-only dump (kernel filter) | kernel walk matching nothing |\n|---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s (%.0f/s) | %s | %s | %s |\n", r.proxy, secs(r.fill), float64(r.entries)/r.fill.Seconds(),
			secs(r.dump), secs(r.udp), secs(r.walk))
	}
	for _, r := range rows {
		cleanup := r.cleanup.Seconds()
		if !r.done {
			cleanup = -1
		}
		family := "" // IPv4 lines are as they were before IPv6 runs
		if r.shape == framework.ShapeIPv6 {
			family = " family=ipv6"
		}
		fmt.Fprintf(&b, "conntrack: proxy=%s%s entries=%d cleanup_s=%.2f peak_rss_mb=%d wrongly_deleted=%d cpu_s=%.2f\n",
			r.proxy, family, r.entries, cleanup, r.peakRSS>>20, r.wronglyDeleted, r.cpu.Seconds())
	}
	t.Log(b.String())
	fmt.Print(b.String())
}
