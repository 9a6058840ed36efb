//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

const restoreFailures = "kubeproxy_sync_proxy_rules_iptables_restore_failures_total"

// testRestoreFailure makes iptables-restore fail for real, twice:
//
//   - a write: an operator flushed a service's KUBE-SVC chain and deleted
//     one of its KUBE-SEP chains; the next partial sync of that service
//     rewrites KUBE-SVC with a jump to the deleted chain, which iptables
//     rejects. The rules in force stay as they were, the failure is
//     counted and logged with the offending lines, the next sync is full
//     and heals the service; the daemon keeps running.
//   - a deletion: an operator's rule jumps to a KUBE-SEP chain whose
//     endpoint then leaves. iptables refuses to delete the chain; the
//     failure is counted, but the service's new rules are applied anyway.
//
// The sync period is long so that no periodic full sync hides the failure.
func testRestoreFailure(t *testing.T) {
	m := startMode(t, "iptables", 3, "--iptables-sync-period=10m")
	pods := m.Topo.Pods
	svc := m.EchoService(t, "rf", pods...)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(pods), true)
	loop := framework.StartEchoLoop(m.Topo.ClientNS, "tcp", addr, 100*time.Millisecond)
	defer loop.Stop()

	t.Run("write rejected", func(t *testing.T) {
		svcChain, seps := serviceChains(t, m, "rf:tcp")
		failures := metric(t, m.daemon, restoreFailures)
		nodeRun(t, m.Env, "iptables", "-t", "nat", "-F", svcChain)
		nodeRun(t, m.Env, "iptables", "-t", "nat", "-F", seps[pods[0].IP])
		nodeRun(t, m.Env, "iptables", "-t", "nat", "-X", seps[pods[0].IP])
		at := time.Now()
		setSliceEndpoints(t, m.Env, svc, pods[:2])
		waitMetricAbove(t, m.daemon, restoreFailures, failures)
		failedAt := time.Now()
		healed := waitServedBy(t, loop, at, podNames(pods[:2]), 10, converge)
		if !logHas(m.daemon, "iptables-restore failed", "lines=", seps[pods[0].IP]) {
			t.Errorf("no log line with the offending lines naming %s:\n%s", seps[pods[0].IP], m.daemon.LogTail(20))
		}
		if !logHas(m.daemon, "Sync failed; the next sync will be full") {
			t.Errorf("no log line announcing the full sync")
		}
		t.Logf("restore failure counted %s after the change; service healed (only %v answering) %s after it",
			secs(failedAt.Sub(at)), podNames(pods[:2]), secs(max(0, healed.Sub(at))))
	})

	t.Run("deletion refused", func(t *testing.T) {
		_, seps := serviceChains(t, m, "rf:tcp")
		blocked := seps[pods[1].IP]
		failures := metric(t, m.daemon, restoreFailures)
		nodeRun(t, m.Env, "iptables", "-t", "nat", "-A", "OUTPUT", "-d", "192.0.2.1/32", "-j", blocked)
		at := time.Now()
		setSliceEndpoints(t, m.Env, svc, pods[:1])
		waitServedBy(t, loop, at, podNames(pods[:1]), 20, converge)
		applied := lastOutside(loop.Results(), at, podNames(pods[:1]))
		waitMetricAbove(t, m.daemon, restoreFailures, failures)
		if rules := chainRules(t.Context(), m.Env, "iptables", "nat", blocked); rules == nil {
			t.Errorf("%s was deleted although a rule still jumps to it", blocked)
		}
		t.Logf("KUBE-SEP chain of the removed endpoint kept (referenced); its last request came %s after the change",
			secs(max(0, applied.Sub(at))))
	})

	sum := framework.Summarize(loop.Stop(), time.Time{})
	t.Logf("client over both faults: %d connections, %d failed (the flushed service chain breaks the service until the full sync)",
		sum.Total, sum.Failed)
	if exited, err := m.daemon.Exited(); exited {
		t.Errorf("daemon exited: %v", err)
	}
}

// serviceChains returns the KUBE-SVC chain of the service port whose
// comment starts with "<namespace>/<name>" and its KUBE-SEP chain per
// endpoint IP.
func serviceChains(t *testing.T, m *modeEnv, name string) (string, map[string]string) {
	t.Helper()
	_, rule := ruleWith(chainRules(t.Context(), m.Env, "iptables", "nat", "KUBE-SERVICES"), m.Namespace+"/"+name+" cluster IP")
	if rule == "" {
		t.Fatalf("no KUBE-SERVICES rule for %s", name)
	}
	svcChain := jumpTarget(rule)
	seps := map[string]string{}
	for _, r := range chainRules(t.Context(), m.Env, "iptables", "nat", svcChain) {
		if _, after, ok := strings.Cut(r, " -> "); ok {
			ip, _, _ := strings.Cut(after, ":")
			seps[ip] = jumpTarget(r)
		}
	}
	return svcChain, seps
}

func metric(t *testing.T, d *framework.Daemon, name string) float64 {
	t.Helper()
	v, err := d.MetricValue(t.Context(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// counter is a counter's value, 0 while a labelled one has no sample yet.
func counter(t *testing.T, d *framework.Daemon, name string) float64 {
	t.Helper()
	text, err := d.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	v, err := framework.ParseMetric(text, name, nil)
	if err != nil {
		return 0
	}
	return v
}

func waitMetricAbove(t *testing.T, d *framework.Daemon, name string, v float64) {
	t.Helper()
	err := framework.WaitFor(converge, func() (bool, error) {
		got, err := d.MetricValue(t.Context(), name, nil)
		return got > v, err
	})
	if err != nil {
		t.Fatalf("%s never went above %v: %v", name, v, err)
	}
}
