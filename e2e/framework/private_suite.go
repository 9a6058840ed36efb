package framework

import (
	"context"
	"path/filepath"
	"testing"
)

// PrivateSuite starts a control plane of the test's own (hack/local-up.sh
// on free ports, deploy/ applied, a daemon kubeconfig minted) and returns
// a copy of s that uses it, for tests that stop the API server and must not
// disturb the shared one. The cluster is stopped in t.Cleanup.
func PrivateSuite(t testing.TB, s *Suite) *Suite {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c, err := StartCluster(ctx, s.Root)
	if err != nil {
		t.Fatalf("private control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop private control plane: %v", err)
		}
	})
	objs, err := ReadManifests(filepath.Join(s.Root, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyManifests(ctx, c.Config, objs); err != nil {
		t.Fatal(err)
	}
	priv := *s
	priv.Cluster = c
	priv.DaemonKubeconfig = filepath.Join(t.TempDir(), "switchyard.kubeconfig")
	if err := c.ServiceAccountKubeconfig(ctx, DaemonSANamespace, DaemonSAName, priv.DaemonKubeconfig, daemonTokenTTL); err != nil {
		t.Fatal(err)
	}
	return &priv
}

// SetupWithAPIForward is Setup that also returns the nsforward process
// carrying the node namespace's API traffic: stopping it cuts the daemon
// off the API server while the rest of the world can still write objects;
// StartAPIForward reconnects it.
func SetupWithAPIForward(t testing.TB, s *Suite, spec TopologySpec) (*Env, *Process) {
	t.Helper()
	requireShape(t, s, spec.Shape)
	topo := NewTopology(t, spec)
	StartEchoServers(t, s.EchoServerBin, topo)
	fwd := StartAPIForward(t, s.NSForwardBin, topo.NodeNS, s.Cluster.APIAddr)
	return newEnv(t, s, topo), fwd
}
