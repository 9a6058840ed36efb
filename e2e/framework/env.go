package framework

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Env is one test's world: its namespaces, echo servers, apiserver access
// from the node namespace, a Node object and a Kubernetes namespace for its
// objects. Setup creates it; t.Cleanup removes all of it.
type Env struct {
	Suite *Suite
	Topo  *Topology
	// Namespace is the Kubernetes namespace of the test's Services and
	// EndpointSlices (named after the topology id).
	Namespace string
	Client    kubernetes.Interface // admin
}

// Setup builds an Env for t. A shape the cluster's service range cannot
// serve (an IPv4-only apiserver reused through $SWITCHYARD_KUBECONFIG)
// skips t.
func Setup(t testing.TB, s *Suite, spec TopologySpec) *Env {
	t.Helper()
	e, _ := SetupWithAPIForward(t, s, spec)
	return e
}

// newEnv creates the test's Node object and Kubernetes namespace for topo.
func newEnv(t testing.TB, s *Suite, topo *Topology) *Env {
	t.Helper()
	e := &Env{Suite: s, Topo: topo, Namespace: topo.ID, Client: s.Cluster.Client}
	e.createNode(t)
	e.createNamespace(t)
	return e
}

// requireShape skips t unless the cluster can allocate service IPs of
// every family of shape.
func requireShape(t testing.TB, s *Suite, shape Shape) {
	t.Helper()
	if !shape.HasIPv6() {
		return
	}
	fams, err := ServiceFamilies(context.Background(), s.Cluster.Client)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range shape.Families() {
		if !slices.Contains(fams, f) {
			t.Skipf("the cluster's service range has %v, no %s: shape %s needs --service-cluster-ip-range=%s",
				fams, f, shape, DefaultServiceCIDRs)
		}
	}
}

func (e *Env) createNode(t testing.TB) {
	t.Helper()
	nodes := e.Client.CoreV1().Nodes()
	var ips, podCIDRs []string
	for _, n := range e.Topo.Nets {
		ips, podCIDRs = append(ips, n.NodeIP), append(podCIDRs, n.PodCIDR)
	}
	if err := CreateNode(context.Background(), e.Client, e.Topo.NodeName, ips, podCIDRs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nodes.Delete(context.Background(), e.Topo.NodeName, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete node %s: %v", e.Topo.NodeName, err)
		}
	})
}

// createNamespace makes (or reuses) the test's namespace. Cleanup empties it
// but leaves it in place: without a controller-manager a deleted namespace
// never finalizes, and a Terminating namespace would refuse new objects if
// a later run drew the same id. A later test's daemon must not see this
// test's Services and EndpointSlices, so they are deleted explicitly.
func (e *Env) createNamespace(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", e.Namespace, err)
	}
	t.Cleanup(func() {
		if err := e.deleteObjects(ctx); err != nil {
			t.Errorf("clean up namespace %s: %v", e.Namespace, err)
		}
	})
}

// deleteObjects removes the test's EndpointSlices and Services.
func (e *Env) deleteObjects(ctx context.Context) error {
	del := metav1.DeleteOptions{}
	err := e.Client.DiscoveryV1().EndpointSlices(e.Namespace).DeleteCollection(ctx, del, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("delete endpointslices: %w", err)
	}
	svcs, err := e.Client.CoreV1().Services(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	for _, svc := range svcs.Items {
		if err := e.Client.CoreV1().Services(e.Namespace).Delete(ctx, svc.Name, del); err != nil {
			return fmt.Errorf("delete service %s: %w", svc.Name, err)
		}
	}
	return nil
}

// CreateService creates svc (its namespace defaults to the Env's). Unless
// svc names an ipFamilyPolicy, it gets the families of the Env's shape
// (Shape.ApplyTo).
func (e *Env) CreateService(t testing.TB, svc *corev1.Service) *corev1.Service {
	t.Helper()
	if svc.Namespace == "" {
		svc.Namespace = e.Namespace
	}
	e.Topo.Shape.ApplyTo(svc)
	got, err := e.Client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", svc.Namespace, svc.Name, err)
	}
	return got
}

// CreateEndpointSlice creates s (its namespace defaults to the Env's).
func (e *Env) CreateEndpointSlice(t testing.TB, s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	t.Helper()
	if s.Namespace == "" {
		s.Namespace = e.Namespace
	}
	got, err := e.Client.DiscoveryV1().EndpointSlices(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create endpointslice %s/%s: %v", s.Namespace, s.Name, err)
	}
	return got
}

// EchoService creates a ClusterIP Service name with ports "tcp" (TCP 80) and
// "udp" (UDP 80) targeting EchoPort, with pods as ready endpoints on the
// Env's node (CreatePodSlices). It returns the Service with its IPs.
func (e *Env) EchoService(t testing.TB, name string, pods ...Pod) *corev1.Service {
	t.Helper()
	svc := e.CreateService(t, NewService(e.Namespace, name,
		NewServicePort("tcp", corev1.ProtocolTCP, 80, EchoPort),
		NewServicePort("udp", corev1.ProtocolUDP, 80, EchoPort)))
	ports := []discoveryv1.EndpointPort{
		NewEndpointPort("tcp", corev1.ProtocolTCP, EchoPort),
		NewEndpointPort("udp", corev1.ProtocolUDP, EchoPort),
	}
	e.CreatePodSlices(t, svc, "1", ports, pods...)
	return svc
}

// CreatePodSlices creates svc's EndpointSlices with pods as ready endpoints
// on the Env's node: one slice per family of the topology, named
// SliceName(svc, suffix, family).
func (e *Env) CreatePodSlices(t testing.TB, svc *corev1.Service, suffix string, ports []discoveryv1.EndpointPort, pods ...Pod) {
	t.Helper()
	e.CreateFamilySlices(t, svc, suffix, ports, func(f corev1.IPFamily) []discoveryv1.Endpoint {
		return PodEndpointsOf(f, e.Topo.NodeName, pods...)
	})
}

// CreateFamilySlices creates one EndpointSlice of svc per family of the
// topology, named SliceName(svc, suffix, family), with the endpoints eps
// returns for that family.
func (e *Env) CreateFamilySlices(t testing.TB, svc *corev1.Service, suffix string, ports []discoveryv1.EndpointPort,
	eps func(corev1.IPFamily) []discoveryv1.Endpoint) {
	t.Helper()
	for _, f := range e.Topo.Families() {
		s := NewEndpointSlice(svc, suffix, ports, eps(f)...)
		s.Name = e.SliceName(svc, suffix, f)
		s.AddressType = discoveryv1.AddressType(f)
		e.CreateEndpointSlice(t, s)
	}
}

// SliceName names svc's EndpointSlice of family f: "<service>-<suffix>"
// for the topology's primary family, as NewEndpointSlice names it, and
// "<service>-<suffix>-ipv6" for a dual-stack topology's second family.
func (e *Env) SliceName(svc *corev1.Service, suffix string, f corev1.IPFamily) string {
	name := svc.Name + "-" + suffix
	if f != e.Topo.Nets[0].Family {
		name += "-" + FamilySuffix(f)
	}
	return name
}

// DaemonClient is a clientset with the daemon's identity whose connections
// start in the node namespace, i.e. go through nsforward exactly as the
// daemon's do.
func (e *Env) DaemonClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := restConfigFromKubeconfig(e.Suite.DaemonKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = Dialer(e.Topo.NodeNS)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// StartDaemon runs switchyard in the node namespace with DefaultDaemonArgs
// followed by args, as ServiceAccount kube-system/switchyard. It does not
// wait for health (see Daemon.WaitHealthy).
func (e *Env) StartDaemon(t testing.TB, args ...string) *Daemon {
	t.Helper()
	bin, err := e.Suite.DaemonBinary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return StartDaemonIn(t, bin, e.Topo.NodeNS, e.daemonArgs(e.Suite.DaemonKubeconfig, args)...)
}

// daemonArgs is DefaultDaemonArgs with the shape's --cluster-cidr (one CIDR
// per family), then args.
func (e *Env) daemonArgs(kubeconfig string, args []string) []string {
	all := DefaultDaemonArgs(kubeconfig, e.Topo.NodeName)
	if e.Topo.Shape.HasIPv6() {
		all = append(all, "--cluster-cidr="+e.Topo.Shape.ClusterCIDR())
	}
	return append(all, args...)
}

// StartPrometheus runs Prometheus in the node namespace scraping the daemon's
// default metrics address every second.
func (e *Env) StartPrometheus(t testing.TB) *Prometheus {
	t.Helper()
	return StartPrometheus(t, e.Topo.NodeNS)
}
