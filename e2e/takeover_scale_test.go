//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
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

// createBackground creates n ClusterIP services of ports TCP ports of the
// topology's families, each with one EndpointSlice per family of eps
// endpoints in 10.250.0.0/16 or fd00:250::/32 (no pod there): through the
// API, or straight in etcd (seedByEtcd; single-stack shapes only).
func createBackground(t *testing.T, env *framework.Env, n, eps, ports int) {
	t.Helper()
	if n == 0 {
		return
	}
	dual := env.Topo.Shape == framework.ShapeDual
	if dual && os.Getenv(scaleSeedEnv) == "etcd" {
		t.Fatalf("%s=etcd: the etcd seeder writes single-stack Services only", scaleSeedEnv)
	}
	if !dual && seedByEtcd(t, n) {
		seedBackground(t, env.Topo.Shape, env.Namespace, env.Topo.NodeName, n, eps, ports)
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

// createBackgroundService creates service i and its slice (see
// backgroundObjects) through the API.
func createBackgroundService(ctx context.Context, cs kubernetes.Interface, env *framework.Env, i, eps, ports int) error {
	svc, slices := backgroundObjectsOf(env.Topo.Shape, env.Namespace, env.Topo.NodeName, i, eps, ports)
	if _, err := cs.CoreV1().Services(env.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, s := range slices {
		if _, err := cs.DiscoveryV1().EndpointSlices(env.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// backgroundObjectsOf is backgroundObjects for a topology's shape: the
// Service of the shape's families (framework.Shape.ApplyTo) and one slice
// per family, the IPv6 one "bg-%05d-6" with addresses in fd00:250::/32.
func backgroundObjectsOf(shape framework.Shape, ns, node string, i, eps, ports int) (*corev1.Service, []*discoveryv1.EndpointSlice) {
	svc, v4 := backgroundObjects(ns, node, i, eps, ports)
	shape.ApplyTo(svc)
	var out []*discoveryv1.EndpointSlice
	for _, f := range shape.Families() {
		s := v4.DeepCopy()
		if f == corev1.IPv6Protocol {
			s.Name, s.AddressType = backgroundSliceName(i, f), discoveryv1.AddressTypeIPv6
			for j := range s.Endpoints {
				k := i*eps + j
				s.Endpoints[j].Addresses = []string{backgroundAddr(f, 250, k/250, k)}
			}
		}
		out = append(out, s)
	}
	return svc, out
}

// backgroundSliceName is background service i's slice of family f.
func backgroundSliceName(i int, f corev1.IPFamily) string {
	if f == corev1.IPv6Protocol {
		return fmt.Sprintf("bg-%05d-6", i)
	}
	return fmt.Sprintf("bg-%05d-1", i)
}

// backgroundAddr is an endpoint address of family f in band (10.band.0.0/16
// or fd00:band::/32), unique for (hi mod 250, lo mod 250); no pod has it.
func backgroundAddr(f corev1.IPFamily, band, hi, lo int) string {
	if f == corev1.IPv6Protocol {
		// The API takes IPv6 addresses in canonical form only.
		return netip.MustParseAddr(fmt.Sprintf("fd00:%d::%x:%x", band, hi%250, lo%250+1)).String()
	}
	return fmt.Sprintf("10.%d.%d.%d", band, hi%250, lo%250+1)
}

// backgroundObjects is background service i of namespace ns, "bg-%05d" with
// ports ports (80, 81, ... to EchoPort, EchoPort+1, ...), and its slice
// "bg-%05d-1" of eps ready endpoints on node, as they are written (the
// apiserver allocates the Service's address).
func backgroundObjects(ns, node string, i, eps, ports int) (*corev1.Service, *discoveryv1.EndpointSlice) {
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
	svc := framework.NewService(ns, name, sps...)
	endpoints := make([]discoveryv1.Endpoint, eps)
	for j := range endpoints {
		k := i*eps + j
		endpoints[j] = framework.ReadyEndpoint(backgroundAddr(corev1.IPv4Protocol, 250, k/250, k), node)
	}
	return svc, framework.NewEndpointSlice(svc, "1", eports, endpoints...)
}
