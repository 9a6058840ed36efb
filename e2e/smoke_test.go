//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// wait30s bounds convergence waits in the smoke tests.
const wait30s = 30 * time.Second

// TestSmoke proves the harness itself, without the daemon: the topology
// carries traffic, the echo servers identify themselves and the source, and
// the daemon's identity reaches the apiserver from inside the node namespace
// with exactly the deployed RBAC. Finally everything is gone after cleanup.
func TestSmoke(t *testing.T) {
	var topo *framework.Topology
	t.Run("env", func(t *testing.T) {
		env := framework.Setup(t, suite, framework.TopologySpec{Pods: 2})
		topo = env.Topo
		t.Run("client reaches every pod by pod IP", func(t *testing.T) { checkDirectPodTraffic(t, env) })
		t.Run("pod reaches pod across the bridge", func(t *testing.T) { checkPodToPod(t, env) })
		t.Run("apiserver in node namespace via nsforward", func(t *testing.T) { checkDaemonIdentity(t, env) })
	})
	t.Run("cleanup removed everything", func(t *testing.T) { checkTornDown(t, topo) })
}

func checkDirectPodTraffic(t *testing.T, env *framework.Env) {
	for _, pod := range env.Topo.Pods {
		addr := net.JoinHostPort(pod.IP, strconv.Itoa(framework.EchoPort))
		for _, proto := range []string{"tcp", "udp"} {
			r, err := framework.Echo(t.Context(), env.Topo.ClientNS, proto, addr)
			if err != nil {
				t.Errorf("%s %s from client: %v", proto, addr, err)
				continue
			}
			if r.Name != pod.Name || r.SourceIP() != env.Topo.ClientIP {
				t.Errorf("%s %s: answered by %q seeing source %s; want %q seeing the client %s",
					proto, addr, r.Name, r.SourceIP(), pod.Name, env.Topo.ClientIP)
			}
		}
	}
}

func checkPodToPod(t *testing.T, env *framework.Env) {
	from, to := env.Topo.Pods[0], env.Topo.Pods[1]
	addr := net.JoinHostPort(to.IP, strconv.Itoa(framework.EchoPort))
	r, err := framework.Echo(t.Context(), from.NS, "tcp", addr)
	if err != nil {
		t.Fatalf("%s -> %s: %v", from.Name, addr, err)
	}
	if r.Name != to.Name || r.SourceIP() != from.IP {
		t.Errorf("%s -> %s: got %+v, want %s seeing %s", from.Name, addr, r, to.Name, from.IP)
	}
}

// checkDaemonIdentity talks to the apiserver as kube-system/switchyard from
// the node namespace: reads work, writes to Services are forbidden.
func checkDaemonIdentity(t *testing.T, env *framework.Env) {
	ctx := t.Context()
	svc := env.EchoService(t, "smoke", env.Topo.Pods...)
	cs := env.DaemonClient(t)
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil || string(body) != "ok" {
		t.Fatalf("/readyz from %s: %q, %v", env.Topo.NodeNS, body, err)
	}
	svcs, err := cs.CoreV1().Services(env.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(svcs.Items) != 1 || svcs.Items[0].Spec.ClusterIP != svc.Spec.ClusterIP {
		t.Errorf("list services as daemon: %v, %v; want the one %s", svcs, err, svc.Spec.ClusterIP)
	}
	slices, err := cs.DiscoveryV1().EndpointSlices(env.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(slices.Items) != 1 || len(slices.Items[0].Endpoints) != len(env.Topo.Pods) {
		t.Errorf("list endpointslices as daemon: %v, %v", slices, err)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, env.Topo.NodeName, metav1.GetOptions{})
	if err != nil || len(node.Status.Addresses) == 0 || node.Status.Addresses[0].Address != env.Topo.NodeIP {
		t.Errorf("get own node as daemon: %v, %v", node, err)
	}
	_, err = cs.CoreV1().Services(env.Namespace).Create(ctx, framework.NewService(env.Namespace, "nope"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("creating a service as the daemon: %v, want Forbidden", err)
	}
}

func checkTornDown(t *testing.T, topo *framework.Topology) {
	if topo == nil {
		t.Skip("setup did not get far enough")
	}
	for _, ns := range topo.Namespaces() {
		if _, err := os.Stat(framework.NetnsPath(ns)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s still exists (stat: %v)", ns, err)
		}
	}
	_, err := suite.Cluster.Client.CoreV1().Nodes().Get(context.Background(), topo.NodeName, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("node %s after cleanup: %v, want NotFound", topo.NodeName, err)
	}
	svcs, err := suite.Cluster.Client.CoreV1().Services(topo.ID).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(svcs.Items) != 0 {
		t.Errorf("services left in %s: %v, %v", topo.ID, svcs, err)
	}
}

// TestSmokePrometheus proves the Prometheus helper: a server in a node
// namespace scraping itself answers a query for its own target.
func TestSmokePrometheus(t *testing.T) {
	topo := framework.NewTopology(t, framework.TopologySpec{})
	prom := framework.StartPrometheus(t, topo.NodeNS, framework.PrometheusAddr)
	err := framework.WaitFor(wait30s, func() (bool, error) {
		samples, err := prom.Query(t.Context(), `up{job="switchyard"}`)
		if err != nil || len(samples) != 1 {
			return false, err
		}
		return samples[0].Value == 1 && samples[0].Labels["instance"] == framework.PrometheusAddr, nil
	})
	if err != nil {
		t.Fatalf("prometheus never saw its own target up: %v", err)
	}
}
