//go:build e2e

package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// testUserspaceSourceLocalRemote: the userspace proxy's source
// preservation (--userspace-transparent, on by default) for a
// LoadBalancer service with externalTrafficPolicy Local whose endpoints
// are one pod on this node and two registered on another node. The
// client outside the cluster reaches only the local pod, which sees the
// client's address, on the NodePort and on the load-balancer IP. A pod's
// traffic to the same addresses is cluster traffic: it may reach the
// "remote" endpoints, and those see the node, since their replies to a
// client address would not come back through this node's socket. With
// only remote endpoints, the client's connections are dropped (as in
// every mode: health checks steer load balancers away) while pods are
// still served, from the node's address.
func testUserspaceSourceLocalRemote(t *testing.T, m *modeEnv) {
	const lbIP = "203.0.113.30"
	local, remote := m.Topo.Pods[:1], m.Topo.Pods[1:]
	svc := localLBService(t, m, "src-mixed", lbIP, local, remote)
	np := hostPort(m.Topo.NodeIP, svc.Spec.Ports[0].NodePort)
	for _, addr := range []string{np, hostPort(lbIP, 80)} {
		waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(local), true)
		seen := sources(t, m.Topo.ClientNS, addr, 10)
		t.Logf("client %s -> %s (eTP=Local, local endpoint): endpoints saw %v", m.Topo.ClientIP, addr, seen)
		if len(seen) != 1 || seen[m.Topo.ClientIP] == 0 {
			t.Errorf("client -> %s: endpoints saw %v, want only the client %s", addr, seen, m.Topo.ClientIP)
		}
	}
	podClient := m.Topo.Pods[0].NS
	waitServed(t, podClient, "tcp", np, podNames(m.Topo.Pods), true)
	seen := sources(t, podClient, np, 12)
	t.Logf("pod %s -> %s (cluster traffic, local and remote endpoints): endpoints saw %v", m.Topo.Pods[0].IP, np, seen)
	if len(seen) != 1 || seen[m.Topo.BridgeIP] == 0 {
		t.Errorf("pod -> NodePort: endpoints saw %v, want only the node %s", seen, m.Topo.BridgeIP)
	}

	only := localLBService(t, m, "src-remote", "203.0.113.31", nil, remote)
	onlyNP := hostPort(m.Topo.NodeIP, only.Spec.Ports[0].NodePort)
	waitServed(t, podClient, "tcp", onlyNP, podNames(remote), true)
	seen = sources(t, podClient, onlyNP, 6)
	t.Logf("pod -> %s (eTP=Local, remote endpoints only): endpoints saw %v", onlyNP, seen)
	if len(seen) != 1 || seen[m.Topo.BridgeIP] == 0 {
		t.Errorf("pod -> NodePort with remote endpoints only: endpoints saw %v, want only the node %s", seen, m.Topo.BridgeIP)
	}
	if r, err := framework.Echo(t.Context(), m.Topo.ClientNS, "tcp", onlyNP); err == nil {
		t.Errorf("client -> NodePort without a local endpoint was served by %s (source %s), want it dropped", r.Name, r.Source)
	} else {
		t.Logf("client -> %s (eTP=Local, remote endpoints only): %v", onlyNP, err)
	}
}

// localLBService creates a LoadBalancer service (eTP=Local) at lbIP with
// the given local and remote endpoints (remote ones on "other-node").
func localLBService(t *testing.T, m *modeEnv, name, lbIP string, local, remote []framework.Pod) *corev1.Service {
	t.Helper()
	svc := framework.NewService(m.Namespace, name, framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc = m.CreateService(t, svc)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbIP}}
	svc, err := suite.Cluster.Client.CoreV1().Services(m.Namespace).UpdateStatus(t.Context(), svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("setting load balancer status: %v", err)
	}
	eps := append(framework.PodEndpoints(m.Topo.NodeName, local...), framework.PodEndpoints("other-node", remote...)...)
	m.CreateEndpointSlice(t, framework.NewEndpointSlice(svc, "1",
		[]discoveryv1.EndpointPort{framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.EchoPort)}, eps...))
	return svc
}

// sources counts the source IPs the endpoints saw over n requests.
func sources(t *testing.T, ns, addr string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		r, err := framework.Echo(t.Context(), ns, "tcp", addr)
		if err != nil {
			t.Fatalf("%s from %s: %v", addr, ns, err)
		}
		seen[r.SourceIP()]++
	}
	return seen
}
