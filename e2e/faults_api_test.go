//go:build e2e

package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// testAPIServerOutage: on a private control plane, (1) the kube-apiserver
// is stopped for SWITCHYARD_FAULT_OUTAGE (default 60s, the figure) and started again,
// then an endpoint is removed at once; (2) the daemon alone is cut off the
// API (its nsforward stopped) for as long while an endpoint is added back.
// A client connecting every 100 ms must never fail, /livez must stay 200,
// and the daemon must reconnect by itself and apply both changes.
func testAPIServerOutage(t *testing.T) {
	outage := envDuration(t, outageEnv, 60*time.Second)
	priv := framework.PrivateSuite(t, suite)
	env, fwd := framework.SetupWithAPIForward(t, priv, framework.TopologySpec{Pods: 3})
	d := env.StartDaemon(t, "--iptables-sync-period=5s")
	if err := d.WaitHealthy(converge); err != nil {
		t.Fatal(err)
	}
	pods := env.Topo.Pods
	svc := env.EchoService(t, "outage", pods...)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	loop := framework.StartEchoLoop(env.Topo.ClientNS, "tcp", addr, 100*time.Millisecond)
	defer loop.Stop()
	waitServedBy(t, loop, time.Now(), podNames(pods), 10, converge)
	health := framework.PollHealth(d, 500*time.Millisecond)
	defer health.Stop()
	start := time.Now()
	apiServerDown(t, priv, env, svc, loop, outage)
	daemonCutOff(t, priv, env, fwd, svc, loop, outage)

	sum := framework.Summarize(loop.Stop(), start)
	healthz, livez := framework.CountCodes(health.Stop())
	t.Logf("client: %d connections, %d failed, spread %v; /healthz codes %v, /livez codes %v",
		sum.Total, sum.Failed, sum.Servers, healthz, livez)
	if sum.Failed != 0 {
		t.Errorf("%d of %d connections failed (first: %v)", sum.Failed, sum.Total, sum.FirstFailure)
	}
	if len(livez) != 1 || livez[200] == 0 {
		t.Errorf("/livez answered %v, want only 200", livez)
	}
	if exited, err := d.Exited(); exited {
		t.Errorf("daemon exited: %v", err)
	}
}

// apiServerDown stops the kube-apiserver for outage, starts it again and
// removes an endpoint at once: the daemon must reconnect and apply it.
func apiServerDown(t *testing.T, priv *framework.Suite, env *framework.Env, svc *corev1.Service, loop *framework.EchoLoop, outage time.Duration) {
	t.Helper()
	pods := env.Topo.Pods
	stopped, err := priv.Cluster.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(outage)
	if err := stopped.Start(t.Context()); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	upAt := time.Now()
	setSliceEndpoints(t, env, svc, pods[1:])
	waitServedBy(t, loop, upAt, podNames(pods[1:]), 20, 2*time.Minute)
	applied := lastOutside(loop.Results(), upAt, podNames(pods[1:]))
	t.Logf("apiserver down %v: an endpoint removed right after its restart got its last request %s later",
		outage, secs(applied.Sub(upAt)))
}

// daemonCutOff stops the daemon's nsforward for outage while an endpoint
// is added back: it cannot get traffic before the daemon reconnects, and
// must get it after.
func daemonCutOff(t *testing.T, priv *framework.Suite, env *framework.Env, fwd *framework.Process, svc *corev1.Service, loop *framework.EchoLoop, outage time.Duration) {
	t.Helper()
	pods := env.Topo.Pods
	if err := fwd.Stop(); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	setSliceEndpoints(t, env, svc, pods)
	time.Sleep(outage)
	during := framework.Summarize(loop.Results(), cutAt)
	if during.Servers[pods[0].Name] != 0 {
		t.Errorf("%s got traffic while the daemon was cut off (it cannot have seen it come back): %v", pods[0].Name, during.Servers)
	}
	framework.StartAPIForward(t, priv.NSForwardBin, env.Topo.NodeNS, priv.Cluster.APIAddr)
	backAt := time.Now()
	var seen time.Time
	err := framework.WaitFor(2*time.Minute, func() (bool, error) {
		var ok bool
		seen, ok = framework.FirstSuccessAfter(loop.Results(), backAt, func(r framework.EchoResult) bool { return r.Server == pods[0].Name })
		return ok, nil
	})
	if err != nil {
		t.Fatalf("the endpoint added while the daemon was cut off never got traffic: %v", err)
	}
	t.Logf("daemon cut off the API for %v: the endpoint added meanwhile got traffic %s after the API came back",
		outage, secs(seen.Sub(backAt)))
}
