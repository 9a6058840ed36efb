package framework

import (
	"context"
	"testing"
)

// StartDaemonWithEnv is StartDaemon with extra environment variables
// ("NAME=value") for the daemon only, set with env(1) (no shell).
func (e *Env) StartDaemonWithEnv(t testing.TB, env []string, args ...string) *Daemon {
	t.Helper()
	bin, err := e.Suite.DaemonBinary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	all := e.daemonArgs(e.Suite.DaemonKubeconfig, args)
	d := &Daemon{
		NS:          e.Topo.NodeNS,
		HealthzAddr: lastFlagValue(all, "healthz-bind-address", DaemonHealthzAddr),
		MetricsAddr: lastFlagValue(all, "metrics-bind-address", DaemonMetricsAddr),
	}
	argv := append(append([]string{"env"}, env...), append([]string{bin}, all...)...)
	d.Process = StartInNetns(t, "switchyard-"+e.Topo.NodeNS, e.Topo.NodeNS, argv...)
	return d
}
