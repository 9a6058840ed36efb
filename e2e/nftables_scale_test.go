//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// scaleEnv sets the service count of TestNFTablesScale; unset, it skips.
const scaleEnv = "SWITCHYARD_NFT_SCALE"

// TestNFTablesScale measures the real daemon in nftables mode against the
// real apiserver with SWITCHYARD_NFT_SCALE services of 10 endpoints
// each: how long until all are programmed after the first create, and
// the daemon's RSS then and after 30 s. It reports figures; it asserts
// only that everything got programmed. (make bench measures the backend's
// latencies; this is the memory of the whole daemon.) With
// SWITCHYARD_BURST_PROFILES=dir it saves a heap profile once programmed.
func TestNFTablesScale(t *testing.T) {
	n := envInt(t, scaleEnv, 0)
	if n == 0 {
		t.Skip("set " + scaleEnv + "=10000 to measure")
	}
	m := startMode(t, "nftables", 1, "--profiling")
	pod := m.Topo.Pods[0]
	base := m.EchoService(t, "base", pod)
	waitServed(t, m.Topo.ClientNS, "tcp", hostPort(base.Spec.ClusterIP, 80), []string{pod.Name}, true)
	start := daemonRSS(t, m)
	cs := burstClient(t)
	t.Cleanup(func() { // in parallel: the Env's own cleanup deletes one by one
		parallel(t, n, func(i int) error { return deleteScaleService(context.Background(), cs, m, i) })
	})
	t0 := time.Now()
	parallel(t, n, func(i int) error { return createScaleService(t.Context(), cs, m, i) })
	created := time.Since(t0)
	// A service created after all others answers only once a sync has
	// written everything before it.
	marker := m.EchoService(t, "marker", pod)
	waitServed(t, m.Topo.ClientNS, "tcp", hostPort(marker.Spec.ClusterIP, 80), []string{pod.Name}, true)
	programmed := time.Since(t0)
	rss := daemonRSS(t, m)
	saveHeapProfile(t, m, "nftables-scale")
	time.Sleep(30 * time.Second)
	t.Logf("%d services x 10 endpoints: created in %s, all programmed %s after the first create; daemon RSS %.1f MiB before, %.1f MiB once programmed, %.1f MiB 30 s later",
		n, secs(created), secs(programmed), mib(float64(start)), mib(float64(rss)), mib(float64(daemonRSS(t, m))))
}

func daemonRSS(t *testing.T, m *modeEnv) int64 {
	t.Helper()
	mem, err := framework.ReadMemory(m.daemon.PID())
	if err != nil {
		t.Fatal(err)
	}
	return mem.RSS
}

// createScaleService creates service i with a slice of 10 endpoints (not
// reachable: only the programming is measured).
func createScaleService(ctx context.Context, cs kubernetes.Interface, m *modeEnv, i int) error {
	svc := framework.NewService(m.Namespace, fmt.Sprintf("scale-%05d", i), framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc, err := cs.CoreV1().Services(m.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	var eps []discoveryv1.Endpoint
	for j := 0; j < 10; j++ {
		k := i*10 + j
		eps = append(eps, framework.ReadyEndpoint(fmt.Sprintf("10.%d.%d.%d", 100+k>>16, (k>>8)&255, k&255), "node-b"))
	}
	s := framework.NewEndpointSlice(svc, "1", echoPorts()[:1], eps...)
	_, err = cs.DiscoveryV1().EndpointSlices(m.Namespace).Create(ctx, s, metav1.CreateOptions{})
	return err
}

func deleteScaleService(ctx context.Context, cs kubernetes.Interface, m *modeEnv, i int) error {
	name := fmt.Sprintf("scale-%05d", i)
	if err := cs.DiscoveryV1().EndpointSlices(m.Namespace).Delete(ctx, name+"-1", metav1.DeleteOptions{}); err != nil {
		return err
	}
	return cs.CoreV1().Services(m.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
}
