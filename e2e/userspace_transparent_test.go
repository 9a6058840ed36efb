//go:build e2e

package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

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
	const lbN, onlyLBN = 30, 31
	local, remote := m.Topo.Pods[:1], m.Topo.Pods[1:]
	svc := localLBService(t, m, "src-mixed", lbN, local, remote)
	only := localLBService(t, m, "src-remote", onlyLBN, nil, remote)
	m.eachFamily(t, func(t *testing.T, f famView) {
		np := hostPort(f.Topo.NodeIP, svc.Spec.Ports[0].NodePort)
		for _, addr := range []string{np, hostPort(outsideIP(f.Family, lbN), 80)} {
			waitServed(t, f.Topo.ClientNS, "tcp", addr, podNames(local), true)
			seen := sources(t, f.Topo.ClientNS, addr, 10)
			t.Logf("client %s -> %s (eTP=Local, local endpoint): endpoints saw %v", f.Topo.ClientIP, addr, seen)
			if len(seen) != 1 || seen[f.Topo.ClientIP] == 0 {
				t.Errorf("client -> %s: endpoints saw %v, want only the client %s", addr, seen, f.Topo.ClientIP)
			}
		}
		podClient := f.Topo.Pods[0].NS
		waitServed(t, podClient, "tcp", np, podNames(f.Topo.Pods), true)
		seen := sources(t, podClient, np, 12)
		t.Logf("pod %s -> %s (cluster traffic, local and remote endpoints): endpoints saw %v", f.Topo.Pods[0].IP, np, seen)
		if len(seen) != 1 || seen[f.Topo.BridgeIP] == 0 {
			t.Errorf("pod -> NodePort: endpoints saw %v, want only the node %s", seen, f.Topo.BridgeIP)
		}
		checkRemoteOnly(t, f, hostPort(f.Topo.NodeIP, only.Spec.Ports[0].NodePort), podNames(remote))
	})
}

// checkRemoteOnly: a NodePort (eTP=Local) whose endpoints are all on
// another node serves pods, from the node's address, and drops the
// client's connections.
func checkRemoteOnly(t *testing.T, f famView, np string, remote []string) {
	t.Helper()
	podClient := f.Topo.Pods[0].NS
	waitServed(t, podClient, "tcp", np, remote, true)
	seen := sources(t, podClient, np, 6)
	t.Logf("pod -> %s (eTP=Local, remote endpoints only): endpoints saw %v", np, seen)
	if len(seen) != 1 || seen[f.Topo.BridgeIP] == 0 {
		t.Errorf("pod -> NodePort with remote endpoints only: endpoints saw %v, want only the node %s", seen, f.Topo.BridgeIP)
	}
	if r, err := framework.Echo(t.Context(), f.Topo.ClientNS, "tcp", np); err == nil {
		t.Errorf("client -> NodePort without a local endpoint was served by %s (source %s), want it dropped", r.Name, r.Source)
	} else {
		t.Logf("client -> %s (eTP=Local, remote endpoints only): %v", np, err)
	}
}

// localLBService creates a LoadBalancer service (eTP=Local) at
// outsideIP(lbN) of every family with the given local and remote endpoints
// (remote ones on "other-node").
func localLBService(t *testing.T, m *modeEnv, name string, lbN int, local, remote []framework.Pod) *corev1.Service {
	t.Helper()
	svc := framework.NewService(m.Namespace, name, framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc = setLoadBalancerIPs(t, m, m.CreateService(t, svc), m.outsideIPs(lbN)...)
	m.CreateFamilySlices(t, svc, "1", tcpEchoPorts(), func(fam corev1.IPFamily) []discoveryv1.Endpoint {
		return append(framework.PodEndpointsOf(fam, m.Topo.NodeName, local...), framework.PodEndpointsOf(fam, "other-node", remote...)...)
	})
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
