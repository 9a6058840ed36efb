//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/e2e/framework"
	"github.com/switchyard-proxy/switchyard/internal/iptables/sweep"
)

// proxyRun is one proxy on the node: upstream kube-proxy or switchyard, in
// a mode.
type proxyRun struct {
	kubeProxy bool
	mode      string
}

func (p proxyRun) String() string {
	if p.kubeProxy {
		return "kube-proxy " + p.mode
	}
	return "switchyard " + p.mode
}

// takeoverPair is one subtest of TestTakeover. upstreamStart marks a pair
// whose successor is kube-proxy: its startup is upstream's (it removes the
// other modes' rules before its first sync), so failures are measured and
// reported, not held against switchyard.
type takeoverPair struct {
	from, to proxyRun
}

func (p takeoverPair) upstreamStart() bool { return p.to.kubeProxy }

// TestTakeover replaces the proxy of a live node the way a DaemonSet
// rollout does (the old one gets SIGTERM and exits, leaving its rules; the
// new one starts a second later) while a client opens a TCP connection
// every 20 ms to a ClusterIP and to a NodePort, keeps one TCP connection
// exchanging a message every 100 ms and one UDP flow from one source port.
// For every pair it reports failures and the longest gap; for switchyard as
// the successor it requires none, no predecessor chain, table or set left,
// and an endpoint change served afterwards (the new proxy is in charge).
func TestTakeover(t *testing.T) {
	sy := func(mode string) proxyRun { return proxyRun{mode: mode} }
	kp := func(mode string) proxyRun { return proxyRun{kubeProxy: true, mode: mode} }
	pairs := []takeoverPair{
		{kp("iptables"), sy("iptables")},
		{kp("iptables"), sy("nftables")},
		{kp("iptables"), sy("userspace")},
		{kp("nftables"), sy("nftables")},
		{kp("nftables"), sy("iptables")},
		{sy("nftables"), sy("nftables")}, // a rolling update
		{sy("iptables"), sy("nftables")},
		{sy("nftables"), sy("iptables")},
		{sy("iptables"), kp("iptables")},
		{sy("nftables"), kp("nftables")},
		{kp("iptables"), kp("nftables")}, // upstream's own mode switch, for comparison
	}
	if slices.Contains(e2eModes(), "ipvs") {
		// In the VM (hack/vm/e2e-ipvs.sh): IPVS, no kube-proxy binary and
		// no nft; the ipvs mode with the other iptables-based one.
		pairs = []takeoverPair{
			{sy("iptables"), sy("ipvs")},
			{sy("ipvs"), sy("iptables")},
		}
	}
	for _, p := range pairs {
		name := fmt.Sprintf("%s to %s", p.from, p.to)
		t.Run(strings.ReplaceAll(name, " ", "-"), func(t *testing.T) {
			runTakeover(t, p)
		})
	}
}

// takeoverTraffic is the client side of a takeover.
type takeoverTraffic struct {
	clusterIP, nodePort *framework.EchoLoop
	tcp, udp            *framework.EchoStream
}

func startTakeoverTraffic(t *testing.T, env *framework.Env, svc, np *corev1.Service) *takeoverTraffic {
	t.Helper()
	ns := env.Topo.ClientNS
	cip := hostPort(svc.Spec.ClusterIP, 80)
	tr := &takeoverTraffic{
		clusterIP: framework.StartEchoLoop(ns, "tcp", cip, 20*time.Millisecond),
		nodePort:  framework.StartEchoLoop(ns, "tcp", hostPort(env.Topo.NodeIP, np.Spec.Ports[0].NodePort), 20*time.Millisecond),
	}
	var err error
	if tr.tcp, err = framework.StartEchoStream(ns, "tcp", cip, 100*time.Millisecond, time.Second); err != nil {
		t.Fatal(err)
	}
	if tr.udp, err = framework.StartEchoStream(ns, "udp", cip, 100*time.Millisecond, time.Second); err != nil {
		t.Fatal(err)
	}
	return tr
}

// stop ends the traffic and reports each flow; it returns the failures.
func (tr *takeoverTraffic) stop(t *testing.T, since time.Time) int {
	failed := 0
	for _, f := range []struct {
		name    string
		results []framework.EchoResult
	}{
		{"new TCP connections to the ClusterIP", tr.clusterIP.Stop()},
		{"new TCP connections to the NodePort", tr.nodePort.Stop()},
		{"established TCP connection", tr.tcp.Stop()},
		{"UDP flow from one source port", tr.udp.Stop()},
	} {
		s := framework.Summarize(f.results, since)
		t.Logf("%s: %d requests, %d failed, longest gap %v (first failure: %v)", f.name, s.Total, s.Failed, s.LongestOutage, s.FirstFailure)
		if s.Failed > 0 {
			t.Logf("  failed at %s", failureTimes(f.results, since))
		}
		failed += s.Failed
	}
	return failed
}

// failureTimes lists when failed requests started, relative to since
// (the first 10).
func failureTimes(results []framework.EchoResult, since time.Time) string {
	var out []string
	for _, r := range results {
		if r.Err != nil && !r.At.Before(since) && len(out) < 10 {
			out = append(out, "+"+secs(r.At.Sub(since)))
		}
	}
	return strings.Join(out, " ")
}

func runTakeover(t *testing.T, p takeoverPair) {
	env := framework.Setup(t, suite, framework.TopologySpec{Pods: 2})
	n := envInt(t, takeoverServicesEnv, 0)
	createBackground(t, env, n, envInt(t, takeoverEndpointsEnv, 10), 1)
	timeout := takeoverTimeout(n)
	old := startProxy(t, env, p.from)
	if p.from.kubeProxy && !synced(t, old, timeout) {
		// The time box of a bench run: upstream at 10k in iptables mode
		// needs longer than this machine gives it.
		t.Skipf("%s: first sync not done after %s (> %.0f min)", p.from, timeout, timeout.Minutes())
	}
	waitSynced(t, old, timeout)
	svc := env.EchoService(t, "takeover", env.Topo.Pods...)
	np := nodePortEcho(t, env, "takeover-np")
	cip := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, env.Topo.ClientNS, "tcp", cip, podNames(env.Topo.Pods), true)
	waitServed(t, env.Topo.ClientNS, "tcp", hostPort(env.Topo.NodeIP, np.Spec.Ports[0].NodePort), podNames(env.Topo.Pods), true)

	tr := startTakeoverTraffic(t, env, svc, np)
	start := time.Now()
	time.Sleep(time.Second)
	if err := old.Stop(); err != nil {
		t.Errorf("stopping %s: %v", p.from, err)
	}
	stopped := time.Now()
	time.Sleep(time.Second) // the DaemonSet's gap between the old pod and the new
	started := time.Now()
	d := startProxy(t, env, p.to)
	waitSynced(t, d, timeout)
	synced := time.Now()
	left := waitNoLeftovers(t, env, p, timeout)
	if p.to.kubeProxy && p.to.mode == "nftables" && p.from.mode == "nftables" {
		cleanupAfterRollback(t, env)
	}
	cleaned := time.Now()
	time.Sleep(2 * time.Second)
	failed := tr.stop(t, start)
	t.Logf("%s -> %s: old one stopped at +%s, new one started at +%s, synced by +%s, predecessor's objects gone by +%s",
		p.from, p.to, secs(stopped.Sub(start)), secs(started.Sub(start)), secs(synced.Sub(start)), secs(cleaned.Sub(start)))
	if len(left) > 0 {
		t.Errorf("left in the kernel after the takeover:\n  %s\n%s", strings.Join(left, "\n  "), d.LogTail(30))
	}
	if failed > 0 && !p.upstreamStart() {
		t.Errorf("%d requests failed while %s took over from %s (started at %s); its log:\n%s", failed, p.to, p.from, started.Format("15:04:05.000"), d.LogTail(40))
	}
	// The new proxy is in charge: endpoint changes are served, and none of
	// its syncs failed (kube-proxy deletes stale chains a second after it
	// saw them, so two changes, two seconds apart).
	setSliceEndpoints(t, env, svc, env.Topo.Pods[:1])
	waitServed(t, env.Topo.ClientNS, "tcp", cip, podNames(env.Topo.Pods[:1]), true)
	time.Sleep(2 * time.Second)
	setSliceEndpoints(t, env, svc, env.Topo.Pods)
	waitServed(t, env.Topo.ClientNS, "tcp", cip, podNames(env.Topo.Pods), true)
	if n := syncFailures(t, d); n > 0 {
		t.Errorf("%s: %v failed syncs or cleanups after taking over from %s\n%s", p.to, n, p.from, d.LogTail(40))
	}
}

// cleanupAfterRollback logs what switchyard left in the table kube-proxy
// adopted, runs `switchyard --cleanup-after-rollback` (the traffic still
// flowing) and requires nothing of switchyard's left.
func cleanupAfterRollback(t *testing.T, env *framework.Env) {
	t.Helper()
	before, _ := nftObjects(t, env)
	bin, err := suite.DaemonBinary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out, err := framework.RunIn(t.Context(), env.Topo.NodeNS, bin, "--cleanup-after-rollback")
	if err != nil {
		t.Fatalf("switchyard --cleanup-after-rollback: %v\n%s", err, out)
	}
	after, left := nftObjects(t, env)
	t.Logf("kube-proxy's table before --cleanup-after-rollback: %s; after: %s", before, after)
	if len(left) > 0 {
		t.Errorf("switchyard's objects left after --cleanup-after-rollback: %v\n%s", left, out)
	}
}

// syncFailures sums the failure counters kube-proxy and switchyard share.
func syncFailures(t *testing.T, d *framework.Daemon) float64 {
	var sum float64
	for _, name := range []string{
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
		"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
		"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
	} {
		if v, err := d.MetricValue(t.Context(), name, nil); err == nil {
			sum += v
		}
	}
	return sum
}

// nftObjects counts the chains, sets and maps of the ip kube-proxy table
// and names those only switchyard writes.
func nftObjects(t *testing.T, env *framework.Env) (string, []string) {
	out, err := framework.RunIn(t.Context(), env.Topo.NodeNS, "nft", "list", "table", "ip", nftables.TableName)
	if err != nil {
		return err.Error(), nil
	}
	kinds := map[string]int{}
	var sy []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || (f[0] != "chain" && f[0] != "set" && f[0] != "map") {
			continue
		}
		kinds[f[0]]++
		if nftables.SwitchyardObject(f[1]) {
			sy = append(sy, f[0]+" "+f[1])
		}
	}
	return fmt.Sprintf("%d chains, %d sets, %d maps, %d of them switchyard's", kinds["chain"], kinds["set"], kinds["map"], len(sy)), sy
}

func startProxy(t *testing.T, env *framework.Env, p proxyRun) *framework.Daemon {
	t.Helper()
	var d *framework.Daemon
	if p.kubeProxy {
		d = env.StartKubeProxy(t, "--proxy-mode="+p.mode)
	} else {
		d = env.StartDaemon(t, "--proxy-mode="+p.mode)
	}
	if err := d.WaitHealthy(converge); err != nil {
		t.Fatalf("%s not healthy: %v\n%s", p, err, d.LogTail(40))
	}
	return d
}

func waitSynced(t *testing.T, d *framework.Daemon, timeout time.Duration) {
	t.Helper()
	if !synced(t, d, timeout) {
		t.Fatalf("never synced within %s\n%s", timeout, d.LogTail(40))
	}
}

// synced waits for the proxy's first sync (kube-proxy's metric name).
func synced(t *testing.T, d *framework.Daemon, timeout time.Duration) bool {
	err := framework.WaitFor(timeout, func() (bool, error) {
		v, err := d.MetricValue(t.Context(), "kubeproxy_sync_proxy_rules_last_timestamp_seconds", nil)
		return err == nil && v > 0, nil
	})
	return err == nil
}

// waitNoLeftovers polls until nothing of a predecessor is in the node's
// kernel, and returns what is left at the timeout.
func waitNoLeftovers(t *testing.T, env *framework.Env, p takeoverPair, timeout time.Duration) []string {
	var left []string
	_ = framework.WaitFor(timeout, func() (bool, error) {
		left = leftovers(t.Context(), env, p)
		return len(left) == 0, nil
	})
	return left
}

// leftovers lists what the proxy now running would not have written:
// proxy chains of another mode, service chains nothing enters any more
// (a predecessor's, for a successor in the same mode), nftables tables
// when the proxy is iptables-based. IPVS virtual servers (and kube-ipvs0)
// that a predecessor in ipvs mode left stay while connections the
// traffic opened through them last: only the sets count then.
func leftovers(ctx context.Context, env *framework.Env, p takeoverPair) []string {
	now := p.to
	var out []string
	owned := map[string]sweep.Owner{"iptables": iptables.OwnsChain, "userspace": userspace.OwnsChain, "ipvs": ipvs.OwnsChain}[now.mode]
	for _, table := range sweep.Tables() {
		save, err := framework.RunIn(ctx, env.Topo.NodeNS, "iptables-save", "-t", table)
		if err != nil {
			return []string{fmt.Sprintf("iptables-save -t %s: %v", table, err)}
		}
		out = append(out, chainLeftovers(table, save, owned)...)
	}
	if haveTool("nft") {
		tables, err := framework.RunIn(ctx, env.Topo.NodeNS, "nft", "list", "tables")
		if err != nil {
			return append(out, fmt.Sprintf("nft list tables: %v", err))
		}
		for _, l := range strings.Split(tables, "\n") {
			l = strings.TrimSpace(l)
			if strings.HasSuffix(l, " "+nftables.HandoverTable) || (now.mode != "nftables" && strings.HasSuffix(l, " kube-proxy")) {
				out = append(out, l)
			}
		}
	}
	if now.mode != "ipvs" {
		out = append(out, ipvsLeftovers(ctx, env, p.from.mode == "ipvs")...)
	}
	return out
}

// ipvsLeftovers: kube-ipvs0, KUBE- sets and virtual servers, where the
// tools to see them exist; only the sets while draining.
func ipvsLeftovers(ctx context.Context, env *framework.Env, draining bool) []string {
	var out []string
	if _, err := framework.RunIn(ctx, env.Topo.NodeNS, "ip", "link", "show", "kube-ipvs0"); err == nil && !draining {
		out = append(out, "interface kube-ipvs0")
	}
	if haveTool("ipset") {
		sets, _ := framework.RunIn(ctx, env.Topo.NodeNS, "ipset", "list", "-n")
		for _, s := range strings.Fields(sets) {
			if strings.HasPrefix(s, "KUBE-") {
				out = append(out, "ipset "+s)
			}
		}
	}
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil && haveTool("ipvsadm") && !draining {
		list, _ := framework.RunIn(ctx, env.Topo.NodeNS, "ipvsadm", "-Ln")
		for _, l := range strings.Split(list, "\n") {
			if f := strings.Fields(l); len(f) > 0 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP" || f[0] == "FWM") {
				out = append(out, "IPVS virtual server "+strings.Join(f[:2], " "))
			}
		}
	}
	return out
}

func haveTool(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// chainLeftovers: proxy chains the running mode does not own, and nat
// service chains no rule enters.
func chainLeftovers(table, save string, owned sweep.Owner) []string {
	var out []string
	var entered []string
	var chains []string
	for _, l := range strings.Split(save, "\n") {
		if name, _, ok := strings.Cut(strings.TrimPrefix(l, ":"), " "); ok && strings.HasPrefix(l, ":") {
			chains = append(chains, name)
		}
		if f := strings.Fields(l); len(f) > 2 && f[0] == "-A" {
			for i := range f[:len(f)-1] {
				if f[i] == "-j" || f[i] == "-g" {
					entered = append(entered, f[i+1])
				}
			}
		}
	}
	for _, c := range chains {
		switch {
		case !sweep.Known(table, c):
		case owned == nil || !owned(table, c):
			out = append(out, table+" chain "+c)
		case table == "nat" && isPerServiceChain(c) && !slices.Contains(entered, c):
			out = append(out, table+" chain "+c+" (entered by no rule)")
		}
	}
	return out
}

func isPerServiceChain(c string) bool {
	for _, p := range []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"} {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return false
}
