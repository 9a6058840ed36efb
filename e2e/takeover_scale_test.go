//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// Knobs of TestTakeover at scale (make bench): SWITCHYARD_TAKEOVER_SERVICES
// background Services (default 0), each with SWITCHYARD_TAKEOVER_ENDPOINTS
// endpoints (default 10) on addresses nothing answers on, created before
// the first proxy starts.
const (
	takeoverServicesEnv  = "SWITCHYARD_TAKEOVER_SERVICES"
	takeoverEndpointsEnv = "SWITCHYARD_TAKEOVER_ENDPOINTS"
)

// takeoverTimeout bounds a proxy's first sync and the removal of its
// predecessor's objects: 20 s plus 4 s per 100 background services
// (kube-proxy's iptables mode needs minutes at 10k on iptables-nft).
func takeoverTimeout(services int) time.Duration {
	return converge + time.Duration(services/25)*time.Second
}

// createBackground creates n ClusterIP services of one TCP port, each with
// one EndpointSlice of eps endpoints in 10.250.0.0/16 (no pod there).
func createBackground(t *testing.T, env *framework.Env, n, eps, ports int) {
	t.Helper()
	if n == 0 {
		return
	}
	cs := burstClient(t)
	start := time.Now()
	t.Cleanup(func() { deleteBackground(t, cs, env, n) })
	parallel(t, n, func(i int) error { return createBackgroundService(t.Context(), cs, env, i, eps, ports) })
	t.Logf("created %d background services x %d endpoints x %d ports in %s", n, eps, ports, secs(time.Since(start)))
}

// deleteBackground removes the background objects in parallel, before the
// Env's own cleanup (which deletes Services one by one).
func deleteBackground(t *testing.T, cs kubernetes.Interface, env *framework.Env, n int) {
	ctx := context.Background()
	start := time.Now()
	if err := cs.DiscoveryV1().EndpointSlices(env.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the background slices: %v", err)
	}
	parallel(t, n, func(i int) error {
		err := cs.CoreV1().Services(env.Namespace).Delete(ctx, fmt.Sprintf("bg-%05d", i), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	t.Logf("deleted %d background services in %s", n, secs(time.Since(start)))
}

// createBackgroundService creates service i with ports ports (80, 81, ...
// to EchoPort, EchoPort+1, ...) and one slice of eps endpoints.
func createBackgroundService(ctx context.Context, cs kubernetes.Interface, env *framework.Env, i, eps, ports int) error {
	name := fmt.Sprintf("bg-%05d", i)
	var sps []corev1.ServicePort
	var eports []discoveryv1.EndpointPort
	for p := range int32(max(ports, 1)) {
		pn := "tcp"
		if p > 0 {
			pn = fmt.Sprintf("tcp%d", p)
		}
		sps = append(sps, framework.NewServicePort(pn, corev1.ProtocolTCP, 80+p, framework.EchoPort+p))
		eports = append(eports, framework.NewEndpointPort(pn, corev1.ProtocolTCP, framework.EchoPort+p))
	}
	svc, err := cs.CoreV1().Services(env.Namespace).Create(ctx, framework.NewService(env.Namespace, name, sps...), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	endpoints := make([]discoveryv1.Endpoint, eps)
	for j := range endpoints {
		k := i*eps + j
		endpoints[j] = framework.ReadyEndpoint(fmt.Sprintf("10.250.%d.%d", k/250%250, k%250+1), env.Topo.NodeName)
	}
	s := framework.NewEndpointSlice(svc, "1", eports, endpoints...)
	_, err = cs.DiscoveryV1().EndpointSlices(env.Namespace).Create(ctx, s, metav1.CreateOptions{})
	return err
}
