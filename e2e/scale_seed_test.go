//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// seedAutoAbove is the count of background services above which they are
// seeded in etcd unless SWITCHYARD_SCALE_SEED=api: kube-apiserver v1.37's
// ClusterIP allocator makes creating n Services through the API O(n²)
// (21.5k took 25 min, 44k would take ~100), while what TestScale measures
// does not depend on how the background got there.
const seedAutoAbove = 20000

// seedWait bounds the wait for the apiserver to serve what was written in
// (or deleted from) etcd.
const seedWait = 3 * time.Minute

// seedByEtcd tells whether createBackground seeds n services in etcd.
func seedByEtcd(t *testing.T, n int) bool {
	t.Helper()
	endpoint := suite.Cluster.EtcdEndpoint
	switch v := os.Getenv(scaleSeedEnv); v {
	case "etcd":
		if endpoint == "" {
			t.Fatalf("%s=etcd: the apiserver's etcd is unknown; set %s", scaleSeedEnv, framework.EtcdEndpointEnv)
		}
		return true
	case "api":
		return false
	case "":
		if n > seedAutoAbove && endpoint == "" {
			t.Logf("%d background services through the API: set %s to seed them in etcd", n, framework.EtcdEndpointEnv)
		}
		return n > seedAutoAbove && endpoint != ""
	default:
		t.Fatalf("%s=%q: want etcd or api", scaleSeedEnv, v)
		return false
	}
}

// seedBackground writes background services 0..n-1 of namespace ns, of
// the single-family shape's family (backgroundObjectsOf), straight into the
// apiserver's etcd (framework.ServiceSeeder: paced by the apiserver's
// ClusterIP repair loop) and waits until the API lists them all. Cleanup
// deletes everything of ns's Services there too.
func seedBackground(t *testing.T, shape framework.Shape, ns, node string, n, eps, ports int) {
	t.Helper()
	start := time.Now()
	etcd, err := framework.DialEtcd(suite.Cluster.EtcdEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Close() })
	seeder := newSeeder(t, etcd, shape)
	cs := burstClient(t)
	t.Cleanup(func() { unseedBackground(t, cs, seeder, ns) })
	err = seeder.Seed(t.Context(), n, func(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
		return seedObjects(shape, ns, node, i, eps, ports)
	})
	if err != nil {
		t.Fatalf("seeding etcd: %v", err)
	}
	written := time.Now()
	if svcs, slices, err := waitCount(t.Context(), cs, ns, n); err != nil {
		t.Fatalf("after seeding etcd the API lists %d services and %d slices in %s, want %d: %v", svcs, slices, ns, n, err)
	}
	t.Logf("seeded %d %s background services x %d endpoints x %d ports in etcd in %s (written in %s, %s of it waiting for the apiserver's repair loop; all listed through the API %s later)",
		n, shape, eps, ports, secs(time.Since(start)), secs(written.Sub(start)), secs(seeder.Waited), secs(time.Since(written)))
}

// newSeeder is a ServiceSeeder of the shape's one family; the seeder
// writes single-stack Services only, so a dual-stack shape fails t.
func newSeeder(t *testing.T, etcd *framework.Etcd, shape framework.Shape) *framework.ServiceSeeder {
	t.Helper()
	fams := shape.Families()
	if len(fams) != 1 {
		t.Fatalf("the etcd seeder writes single-stack Services; shape %s has %v", shape, fams)
	}
	return &framework.ServiceSeeder{Etcd: etcd, Client: suite.Cluster.Client, Family: fams[0]}
}

// seedObjects is backgroundObjectsOf for a single-family shape: the
// Service and its one slice.
func seedObjects(shape framework.Shape, ns, node string, i, eps, ports int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	svc, slices := backgroundObjectsOf(shape, ns, node, i, eps, ports)
	return svc, slices[0]
}

// waitIPAddresses waits until the API lists n IPAddresses of Services in
// ns.
func waitIPAddresses(ctx context.Context, cs kubernetes.Interface, ns string, n int) error {
	var got int
	err := wait.PollUntilContextTimeout(ctx, time.Second, seedWait, true, func(ctx context.Context) (bool, error) {
		var lerr error
		got, lerr = ipAddressesOf(ctx, cs, ns)
		return lerr == nil && got == n, nil
	})
	if err != nil {
		return fmt.Errorf("the API lists %d IPAddresses of services in %s, want %d: %w", got, ns, n, err)
	}
	return nil
}

// waitCount lists ns's Services and EndpointSlices every second (a list of
// tens of thousands costs the apiserver) until there are n of each, and
// returns the last counts. The lists are consistent (resourceVersion ""):
// served once the watch cache has caught up with etcd.
func waitCount(ctx context.Context, cs kubernetes.Interface, ns string, n int) (svcs, slices int, err error) {
	err = wait.PollUntilContextTimeout(ctx, time.Second, seedWait, true, func(ctx context.Context) (bool, error) {
		var lerr error
		svcs, slices, lerr = countServices(ctx, cs, ns)
		return lerr == nil && svcs == n && slices == n, nil
	})
	return svcs, slices, err
}

// countServices counts ns's Services and EndpointSlices through the API.
func countServices(ctx context.Context, cs kubernetes.Interface, ns string) (int, int, error) {
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	return len(svcs.Items), len(slices.Items), nil
}

// unseedBackground deletes ns's Services, EndpointSlices and their
// IPAddresses from etcd (the test's own through the API included), and
// waits until the API lists none, so the Env's cleanup finds nothing to
// delete one by one.
func unseedBackground(t *testing.T, cs kubernetes.Interface, seeder *framework.ServiceSeeder, ns string) {
	ctx := context.Background()
	start, waited := time.Now(), seeder.Waited
	deleted, err := seeder.DeleteNamespace(ctx, ns)
	if err != nil {
		t.Errorf("deleting the seeded services from etcd: %v", err)
		return
	}
	if svcs, slices, err := waitCount(ctx, cs, ns, 0); err != nil {
		t.Errorf("after deleting them from etcd the API still lists %d services and %d slices in %s", svcs, slices, ns)
	}
	if err := waitIPAddresses(ctx, cs, ns, 0); err != nil {
		t.Error(err)
	}
	t.Logf("deleted %d keys of %s from etcd in %s (%s of it waiting for the apiserver's repair loop; %d waits ended with it idle)", deleted, ns, secs(time.Since(start)), secs(seeder.Waited-waited), seeder.Stalls)
}

// ipAddressesOf counts the IPAddresses the API lists for Services in ns.
func ipAddressesOf(ctx context.Context, cs kubernetes.Interface, ns string) (int, error) {
	ips, err := cs.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ip := range ips.Items {
		if ref := ip.Spec.ParentRef; ref != nil && ref.Resource == "services" && ref.Namespace == ns {
			n++
		}
	}
	return n, nil
}

// Knobs of TestSeedBackground: how many services it seeds (100; their
// endpoints and ports come from SWITCHYARD_SCALE_ENDPOINTS (1) and
// SWITCHYARD_SCALE_PORTS (2)), and how long it then leaves the apiserver's
// repair loop before checking it repaired nothing (a Go duration, 5s; more
// than 60s covers its grace for an IPAddress whose Service it has not seen).
const (
	seedServicesEnv = "SWITCHYARD_SEED_SERVICES"
	seedHoldEnv     = "SWITCHYARD_SEED_HOLD"
)

// TestSeedBackground seeds background services in etcd and checks that the
// apiserver serves them as it serves the same objects created through its
// API, that its allocator sees their addresses as taken and its repair loop
// finds nothing to repair; cleanup deletes them from etcd. It runs for each
// single-family shape of $SWITCHYARD_E2E_FAMILIES (default ipv4 and ipv6;
// the seeder writes no dual-stack Service).
func TestSeedBackground(t *testing.T) {
	if suite.Cluster.EtcdEndpoint == "" {
		t.Skipf("the apiserver's etcd is unknown; set %s", framework.EtcdEndpointEnv)
	}
	shapes, err := framework.ShapesFromEnv([]framework.Shape{framework.ShapeIPv4, framework.ShapeIPv6})
	if err != nil {
		t.Fatal(err)
	}
	for _, shape := range shapes {
		t.Run(string(shape), func(t *testing.T) {
			if shape == framework.ShapeDual {
				t.Skip("the etcd seeder writes single-stack Services only")
			}
			testSeedBackground(t, shape)
		})
	}
}

func testSeedBackground(t *testing.T, shape framework.Shape) {
	n := envInt(t, seedServicesEnv, 100)
	eps, ports := envInt(t, scaleEndpointsEnv, 1), envInt(t, scalePortsEnv, 2)
	cs := burstClient(t)
	ns := seedNamespace(t, cs)
	const node = "seed-node"
	seedBackground(t, shape, ns, node, n, eps, ports)
	svc, slice := seedObjects(shape, ns, node, n, eps, ports)
	if _, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fam := shape.Families()[0]
	compareSeeded(t, cs, ns, fam, n-1, n)
	checkAllocated(t, cs, ns, fmt.Sprintf("bg-%05d", n/2))
	checkNotRepaired(t, cs, ns, n+1)
}

// seedNamespace creates a namespace for TestSeedBackground; it stays (see
// framework.Env: nothing would finalize its deletion), empty.
func seedNamespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "seed-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// compareSeeded compares, through the API, the seeded background Service
// seeded and its slice of family fam with those created through the API as
// background service twin.
func compareSeeded(t *testing.T, cs kubernetes.Interface, ns string, fam corev1.IPFamily, seeded, twin int) {
	t.Helper()
	get := func(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
		svc, err := cs.CoreV1().Services(ns).Get(t.Context(), fmt.Sprintf("bg-%05d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := cs.DiscoveryV1().EndpointSlices(ns).Get(t.Context(), backgroundSliceName(i, fam), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc, s
	}
	svc, s := get(seeded)
	want, wantSlice := get(twin)
	opts := cmp.Options{
		cmpopts.IgnoreFields(corev1.ServiceSpec{}, "ClusterIP", "ClusterIPs"),
		cmpopts.IgnoreFields(discoveryv1.Endpoint{}, "Addresses"),
	}
	if d := cmp.Diff(want.Spec, svc.Spec, opts); d != "" {
		t.Errorf("seeded %s's spec (-created through the API +seeded):\n%s", svc.Name, d)
	}
	if got := framework.FamilyOf(svc.Spec.ClusterIP); got != fam || framework.FamilyOf(want.Spec.ClusterIP) != fam {
		t.Errorf("seeded %s on %s, %s on %s: want %s", svc.Name, svc.Spec.ClusterIP, want.Name, want.Spec.ClusterIP, fam)
	}
	if d := cmp.Diff(wantSlice.Endpoints, s.Endpoints, opts); d != "" || s.Generation != wantSlice.Generation ||
		!cmp.Equal(s.Ports, wantSlice.Ports) || s.AddressType != wantSlice.AddressType {
		t.Errorf("seeded slice %s differs from %s (-API +seeded):\n%s\ngeneration %d, %d", s.Name, wantSlice.Name, d, wantSlice.Generation, s.Generation)
	}
	if svc.UID == "" || svc.CreationTimestamp.IsZero() {
		t.Errorf("seeded %s: uid %q, created %v", svc.Name, svc.UID, svc.CreationTimestamp)
	}
}

// checkAllocated asks the apiserver for seeded Service name's address for
// another Service: its allocator must refuse it.
func checkAllocated(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	svc, err := cs.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dup := framework.NewService(ns, "seed-dup", svc.Spec.Ports...)
	dup.Spec.ClusterIP, dup.Spec.IPFamilies = svc.Spec.ClusterIP, svc.Spec.IPFamilies
	_, err = cs.CoreV1().Services(ns).Create(t.Context(), dup, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "already allocated") {
		t.Errorf("a Service asking for seeded %s's %s: %v, want already allocated", name, svc.Spec.ClusterIP, err)
	}
}

// checkNotRepaired gives the apiserver's ClusterIP repair loop (it handles
// every new Service and IPAddress) SWITCHYARD_SEED_HOLD, then fails on any
// event it recorded in ns or unless want IPAddresses of ns are still there.
func checkNotRepaired(t *testing.T, cs kubernetes.Interface, ns string, want int) {
	t.Helper()
	hold := 5 * time.Second
	if v := os.Getenv(seedHoldEnv); v != "" {
		var err error
		if hold, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s=%q: %v", seedHoldEnv, v, err)
		}
	}
	time.Sleep(hold)
	if got, err := ipAddressesOf(t.Context(), cs, ns); got != want || err != nil {
		t.Errorf("after %s the API lists %d IPAddresses of services in %s, want %d (%v)", hold, got, ns, want, err)
	}
	evs, err := cs.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		t.Errorf("event in %s: %s %s/%s: %s", ns, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note)
	}
}
