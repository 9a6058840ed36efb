//go:build e2e

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// testDaemonKilled: the daemon is SIGKILLed (no cleanup at all) and
// started again. Rules stay in force while it is down, and on start it
// adopts them: its first full sync replaces chains atomically, never
// flushing them first, so a client connecting every 30 ms sees no failure
// and KUBE-SERVICES never loses a rule.
func testDaemonKilled(t *testing.T) {
	m := startMode(t, "iptables", 3)
	pods := m.Topo.Pods
	svc := m.EchoService(t, "sigkill", pods...)
	for _, name := range []string{"other-a", "other-b"} {
		m.EchoService(t, name, pods...)
	}
	addr := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(pods), true)
	before := len(chainRules(t.Context(), m.Env, "iptables", "nat", "KUBE-SERVICES"))

	loop := framework.StartEchoLoop(m.Topo.ClientNS, "tcp", addr, 30*time.Millisecond)
	watch := watchRuleCount(m.Env, "nat", "KUBE-SERVICES", 20*time.Millisecond)
	time.Sleep(time.Second)
	start := time.Now()
	if err := m.daemon.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	time.Sleep(2 * time.Second)
	d := m.StartDaemon(t, "--proxy-mode=iptables")
	restartAt := time.Now()
	if err := d.WaitHealthy(converge); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(converge, func() (bool, error) {
		v, err := d.MetricValue(t.Context(), "kubeproxy_sync_proxy_rules_last_timestamp_seconds", nil)
		return err == nil && v > 0, err
	})
	if err != nil {
		t.Fatalf("restarted daemon never synced: %v", err)
	}
	syncedAt := time.Now()
	time.Sleep(2 * time.Second)
	results := loop.Stop()
	minRules, samples := watch.stop()

	sum := framework.Summarize(results, start)
	t.Logf("SIGKILL at +0s, restart at +%s, first sync done by +%s: %d connections across the restart, %d failed, spread %v",
		secs(restartAt.Sub(killedAt)), secs(syncedAt.Sub(killedAt)), sum.Total, sum.Failed, sum.Servers)
	t.Logf("KUBE-SERVICES: %d rules before, at least %d in each of %d listings during the restart", before, minRules, samples)
	if sum.Total < 100 {
		t.Errorf("only %d connections across the restart, want >= 100", sum.Total)
	}
	if sum.Failed != 0 {
		t.Errorf("%d connections failed across the restart (first: %v)", sum.Failed, sum.FirstFailure)
	}
	if minRules < before {
		t.Errorf("KUBE-SERVICES dropped to %d rules (from %d) during the restart: rules were flushed before being rewritten", minRules, before)
	}
}

// ruleCountWatch lists a chain in the node namespace in a loop and keeps
// the smallest rule count seen.
type ruleCountWatch struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	min     int
	samples int
}

func watchRuleCount(env *framework.Env, table, chain string, every time.Duration) *ruleCountWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &ruleCountWatch{cancel: cancel, min: -1}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for ctx.Err() == nil {
			n := len(chainRules(ctx, env, "iptables", table, chain))
			if ctx.Err() != nil {
				return
			}
			if w.min < 0 || n < w.min {
				w.min = n
			}
			w.samples++
			time.Sleep(every)
		}
	}()
	return w
}

func (w *ruleCountWatch) stop() (minRules, samples int) {
	w.cancel()
	w.wg.Wait()
	return w.min, w.samples
}
