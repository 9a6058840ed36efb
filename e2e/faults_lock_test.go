//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// testXtablesLock: another program holds the xtables lock. Only
// iptables-legacy takes that lock (iptables-nft ignores it), so the node
// is made a legacy node (kubelet's KUBE-IPTABLES-HINT chain in legacy
// mangle) and the daemon gets a private lock file through
// XTABLES_LOCKFILE (honoured by iptables 1.8.9): holding the host's
// /run/xtables.lock would stall every iptables user on the machine. A hold
// shorter than the daemon's 5 s wait delays the sync; a longer one makes
// it fail (counted in switchyard_sync_errors_total) and retry, in full,
// until the lock is free. No connection fails meanwhile.
func testXtablesLock(t *testing.T) {
	lockFile := filepath.Join(t.TempDir(), "xtables.lock")
	lockEnv := "XTABLES_LOCKFILE=" + lockFile
	env := framework.Setup(t, suite, framework.TopologySpec{Pods: 3})
	nodeRun(t, env, "env", lockEnv, "iptables-legacy", "-w", "5", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT")
	d := env.StartDaemonWithEnv(t, []string{lockEnv}, "--proxy-mode=iptables", "--iptables-sync-period=10m")
	if err := d.WaitHealthy(converge); err != nil {
		t.Fatal(err)
	}
	pods := env.Topo.Pods
	svc := env.EchoService(t, "lock", pods...)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	loop := framework.StartEchoLoop(env.Topo.ClientNS, "tcp", addr, 100*time.Millisecond)
	defer loop.Stop()
	waitServedBy(t, loop, time.Now(), podNames(pods), 10, converge)
	if rules := chainRules(t.Context(), env, "iptables-legacy", "nat", "KUBE-SERVICES"); len(rules) == 0 {
		t.Fatalf("daemon did not pick iptables-legacy on a node with kubelet's legacy hint chain")
	}

	for _, tc := range []struct {
		hold time.Duration
		keep []framework.Pod
	}{
		// Each change leaves a set of endpoints disjoint from the one
		// before, or a subset of it, so lastOutside dates it.
		{3 * time.Second, pods[1:]},  // shorter than --wait=5
		{15 * time.Second, pods[:1]}, // longer: every iptables call times out
	} {
		failures := lockFailures(t, d)
		release := holdFlock(t, lockFile)
		at := time.Now()
		setSliceEndpoints(t, env, svc, tc.keep)
		time.Sleep(tc.hold)
		release()
		releasedAt := time.Now()
		waitServedBy(t, loop, at, podNames(tc.keep), 20, converge)
		applied := lastOutside(loop.Results(), at, podNames(tc.keep))
		failed := lockFailures(t, d) - failures
		t.Logf("lock held %v: last request to a removed endpoint %s after the change, %s after the release; %v failed syncs or restores",
			tc.hold, secs(applied.Sub(at)), secs(applied.Sub(releasedAt)), failed)
		if tc.hold < 5*time.Second && failed != 0 {
			t.Errorf("a hold shorter than the wait bound failed %v syncs", failed)
		}
		if tc.hold > 5*time.Second && failed == 0 {
			t.Errorf("a hold longer than the wait bound failed nothing: was the lock honoured?")
		}
	}
	sum := framework.Summarize(loop.Stop(), time.Time{})
	t.Logf("client: %d connections, %d failed", sum.Total, sum.Failed)
	if sum.Failed != 0 {
		t.Errorf("%d connections failed while the lock was held (first: %v)", sum.Failed, sum.FirstFailure)
	}
}

// holdFlock takes an exclusive flock on path, as iptables-legacy does, and
// returns the function that releases it.
func holdFlock(t *testing.T, path string) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

// lockFailures is the number of failed syncs plus failed restores so far.
func lockFailures(t *testing.T, d *framework.Daemon) float64 {
	t.Helper()
	return counter(t, d, restoreFailures) + counter(t, d, "switchyard_sync_errors_total")
}
