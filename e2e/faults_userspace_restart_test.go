//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// restartProbeEvery is the client: a new connection every 50 ms.
const restartProbeEvery = 50 * time.Millisecond

// testUserspaceRestart: in userspace mode the daemon is stopped (SIGKILL
// or SIGTERM) and started again at once while a client in another
// namespace opens a new connection to a cluster IP every 50 ms. Proxy
// sockets die with the process, so before issue 15 the REDIRECT rules
// led new connections to closed ports for ~2 s (about 20 of 100
// refused). With --userspace-restart-fallback the kernel fallback DNATs
// them to the endpoints while no proxy holds the sentinels: none of 100
// may fail (on SIGKILL, a request
// the killed proxy was relaying at that instant is reset and not counted:
// the loop's 50 ms ticks line one up with the kill about every other
// run), and once restarted the proxy serves again.
//
// Without --userspace-restart-fallback (the default) only SIGTERM is
// covered: the stopping daemon hands the traffic to the kernel's DNAT
// (handoff.go) until the new one's first sync; a SIGKILL leaves the
// REDIRECT rules to closed ports until then.
func testUserspaceRestart(sig string, args ...string) func(t *testing.T) {
	return func(t *testing.T) {
		args = append([]string{"--proxy-mode=userspace"}, args...)
		m := startMode(t, "userspace", 3, args[1:]...)
		pods := m.Topo.Pods
		svc := m.EchoService(t, "restart", pods...)
		addr := hostPort(svc.Spec.ClusterIP, 80)
		waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(pods), true)

		loop := framework.StartEchoLoop(m.Topo.ClientNS, "tcp", addr, restartProbeEvery)
		defer loop.Stop()
		time.Sleep(time.Second)
		start := time.Now()
		stop := m.daemon.Kill
		if sig == "SIGTERM" {
			stop = m.daemon.Stop
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		stoppedAt := time.Now()
		d := m.StartDaemon(t, args...)
		if err := d.WaitHealthy(converge); err != nil {
			t.Fatalf("restarted daemon not healthy: %v\n%s", err, d.LogTail(40))
		}
		err := framework.WaitFor(converge, func() (bool, error) {
			v, err := d.MetricValue(t.Context(), "kubeproxy_sync_proxy_rules_last_timestamp_seconds", nil)
			return err == nil && v > 0, err
		})
		if err != nil {
			t.Fatalf("restarted daemon never synced: %v", err)
		}
		syncedAt := time.Now()
		// At least 100 connections from the stop on, and a second of
		// them after the first sync.
		framework.WaitFor(converge, func() (bool, error) {
			return framework.Summarize(loop.Results(), start).Total >= 100 && time.Since(syncedAt) > time.Second, nil
		})
		results := loop.Stop()
		sum := framework.Summarize(results, start)
		t.Logf("userspace %s: stopped in %s, healthy and synced by +%s: %d of %d connections failed (longest outage %s), spread %v",
			sig, secs(stoppedAt.Sub(start)), secs(syncedAt.Sub(stoppedAt)), sum.Failed, sum.Total, sum.LongestOutage, sum.Servers)
		if sum.Total < 100 {
			t.Errorf("only %d connections across the restart, want >= 100", sum.Total)
		}
		failed := failuresAfter(t, results, start, stoppedAt, sig == "SIGKILL")
		if failed != 0 {
			t.Errorf("%d of %d connections failed across %s + restart (first: %v)", failed, sum.Total, sig, sum.FirstFailure)
		}
		// The restarted proxy took its traffic back from the fallback.
		before := relayedBytes(t, d, svc.Namespace+"/"+svc.Name+":tcp")
		if _, err := framework.Echo(t.Context(), m.Topo.ClientNS, "tcp", addr); err != nil {
			t.Fatal(err)
		}
		// The proxy counts a connection's bytes as it relays them, which
		// may end after the client has its echo: poll briefly.
		err = framework.WaitFor(2*time.Second, func() (bool, error) {
			return relayedBytes(t, d, svc.Namespace+"/"+svc.Name+":tcp") > before, nil
		})
		if err != nil {
			t.Errorf("the restarted proxy relayed nothing (%v bytes before and 2 s after a request): traffic stayed on the fallback", before)
		}
	}
}

func relayedBytes(t *testing.T, d *framework.Daemon, servicePort string) float64 {
	t.Helper()
	v, err := d.MetricValue(t.Context(), "switchyard_userspace_bytes_total",
		map[string]string{"service_port": servicePort, "direction": "to_endpoint"})
	if err != nil {
		return 0
	}
	return v
}

// failuresAfter counts the failed requests from start on, logging each
// with its time from the stop. With killed set, a request that had
// already connected when the daemon was SIGKILLed and lost its reply is
// not counted: the proxy process held that connection, and no userspace
// proxy can keep it (SIGTERM gives such connections time to finish, and
// is held to zero).
func failuresAfter(t *testing.T, results []framework.EchoResult, start, stoppedAt time.Time, killed bool) int {
	n := 0
	for _, r := range results {
		if r.Err == nil || r.At.Before(start) {
			continue
		}
		inFlight := killed && r.At.Before(stoppedAt) && strings.Contains(r.Err.Error(), " reply from ")
		t.Logf("request at %+.3fs from the stop failed (in flight at the kill: %v): %v", r.At.Sub(stoppedAt).Seconds(), inFlight, r.Err)
		if !inFlight {
			n++
		}
	}
	return n
}
