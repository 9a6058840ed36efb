package proxier

import (
	"context"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	kubeclientset "github.com/switchyard-proxy/switchyard/internal/kubeapi/clientset"
)

// fullService sets every Service field the proxier reads.
func fullService() *v1.Service {
	svc := makeService("full", withClusterIPs("10.96.0.20", "fd00::20"), withPorts(
		v1.ServicePort{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080},
		v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053},
		v1.ServicePort{Name: "sig", Protocol: v1.ProtocolSCTP, Port: 3868},
	))
	svc.ResourceVersion = "42"
	svc.Spec.Type = v1.ServiceTypeLoadBalancer
	svc.Spec.ExternalIPs = []string{"192.0.2.1", "2001:db8::1"}
	svc.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24", "203.0.113.7/32"}
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	svc.Spec.HealthCheckNodePort = 31000
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
	svc.Spec.TrafficDistribution = ptr.To("PreferClose")
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
		{IP: "192.0.2.100"},
		{IP: "192.0.2.101", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}, // not captured
		{Hostname: "lb.example"},
	}
	return svc
}

// Every field of every ServicePort survives the compact form, the
// trackers and the State.
func TestServiceInfoRoundTrip(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	obj, err := snap.compact(fullService())
	if err != nil {
		t.Fatal(err)
	}
	info, ok := obj.(*serviceInfo)
	if !ok {
		t.Fatalf("compact(Service) = %T, want *serviceInfo", obj)
	}
	common := ServicePort{
		ClusterIPs:               addrs("10.96.0.20", "fd00::20"),
		ExternalIPs:              addrs("192.0.2.1", "2001:db8::1"),
		LoadBalancerIPs:          addrs("192.0.2.100"),
		LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.7/32")},
		AffinityTimeoutSeconds:   600,
		ExternalPolicyLocal:      true,
		InternalPolicyLocal:      true,
		HealthCheckNodePort:      31000,
		TrafficDistribution:      "PreferClose",
	}
	port := func(name string, proto v1.Protocol, p, np uint16) *ServicePort {
		sp := common
		sp.Name, sp.Protocol, sp.Port, sp.NodePort = spn("full", name, proto), proto, p, np
		return &sp
	}
	want := []*ServicePort{ // sorted by port name
		port("dns", v1.ProtocolUDP, 53, 30053),
		port("http", v1.ProtocolTCP, 80, 30080),
		port("sig", v1.ProtocolSCTP, 3868, 0),
	}
	if d := cmp.Diff(want, info.ports, cmpAddrs); d != "" {
		t.Errorf("compact ports (-want +got):\n%s", d)
	}
	snap.Services.update(nil, info)
	st, _ := snap.Snapshot()
	for _, sp := range info.ports {
		if st.Services[sp.Name] != sp {
			t.Errorf("State.Services[%s] is not the compact form's port (a copy, or missing)", sp.Name)
		}
	}
	checkMeta(t, info, "ns/full", "42")
}

// checkMeta checks what client-go reads from an object in its cache: the
// store key and the resource version.
func checkMeta(t *testing.T, obj any, key, rv string) {
	t.Helper()
	if got, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err != nil || got != key {
		t.Errorf("store key = %q, %v; want %q", got, err, key)
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetResourceVersion() != rv {
		t.Fatalf("meta.Accessor: %v, %v; want resource version %q", m, err, rv)
	}
	if km, ok := obj.(interface{ GetName() string }); !ok || key != m.GetNamespace()+"/"+km.GetName() {
		t.Errorf("GetName/GetNamespace disagree with the key %q", key)
	}
}

// A Service the proxier does not program keeps its name in the cache so
// that its later change or deletion is seen.
func TestServiceInfoWithoutPorts(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	headless := makeService("headless", withClusterIPs(v1.ClusterIPNone))
	for _, svc := range []*v1.Service{headless, makeService("ext", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName })} {
		obj, _ := snap.compact(svc)
		info := obj.(*serviceInfo)
		if info.name != (types.NamespacedName{Namespace: testNS, Name: svc.Name}) || info.ports != nil {
			t.Errorf("%s: compact form %+v, want the name and no ports", svc.Name, info)
		}
	}
}

// Every field of every endpoint survives the compact form, the trackers
// and the State: conditions, node (and so IsLocal), zone, hints, address
// and port; duplicates collapse to the most usable copy; the trigger time
// and the Service are kept.
func TestSliceInfoRoundTrip(t *testing.T) {
	rec := &invalidRecorder{}
	snap := NewSnapshotter("node-a", rec.fn)
	s := makeSlice("svc", "svc-1", []sliceEP{
		ep("10.0.0.3").on("node-b").inZone("z2", "z2").forNodes("node-b"),
		ep("10.0.0.1").on("node-a").inZone("z1", "z1", "z2").forNodes("node-a"),
		ep("10.0.0.2").servingTerminating().on("node-c"),
		ep("10.0.0.4").notReady(),
		ep("10.0.0.2").notReady().on("node-d"), // duplicate, less usable: dropped
		ep("10.0.0.5").on("node-e"),
		ep("10.0.0.5").on("node-f"), // duplicate, as usable: the first stays
		ep("not-an-ip"),
	})
	s.ResourceVersion = "7"
	s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-03-04T05:06:07.5Z"}
	obj, err := snap.compact(s)
	if err != nil {
		t.Fatal(err)
	}
	info := obj.(*sliceInfo)
	ip := netip.MustParseAddr
	want := []Endpoint{
		{IP: ip("10.0.0.1"), Port: 8080, Ready: true, Serving: true, NodeName: "node-a", IsLocal: true,
			Topology: &EndpointTopology{Zone: "z1", ZoneHints: []string{"z1", "z2"}, NodeHints: []string{"node-a"}}},
		{IP: ip("10.0.0.2"), Port: 8080, Serving: true, Terminating: true, NodeName: "node-c"},
		{IP: ip("10.0.0.3"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b",
			Topology: &EndpointTopology{Zone: "z2", ZoneHints: []string{"z2"}, NodeHints: []string{"node-b"}}},
		{IP: ip("10.0.0.4"), Port: 8080},
		{IP: ip("10.0.0.5"), Port: 8080, Ready: true, Serving: true, NodeName: "node-e"},
	}
	if d := cmp.Diff(want, info.endpoints, cmpAddrs); d != "" {
		t.Errorf("compact endpoints (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"Endpoint/address"}, rec.got()); d != "" {
		t.Errorf("invalid calls (-want +got):\n%s", d)
	}
	if info.service != "svc" || !info.trigger.Equal(time.Date(2026, 3, 4, 5, 6, 7, 5e8, time.UTC)) {
		t.Errorf("service %q, trigger %v", info.service, info.trigger)
	}
	checkMeta(t, info, "ns/svc-1", "7")

	snap.Endpoints.update(info, false)
	st, diff := snap.Snapshot()
	got := st.Endpoints[httpPort("svc")]
	if d := cmp.Diff(want, got, cmpAddrs); d != "" {
		t.Errorf("State endpoints (-want +got):\n%s", d)
	}
	// One slice with one port: the State uses the cache's array itself.
	if len(got) == 0 || &got[0] != &info.endpoints[0] {
		t.Error("the State holds a copy of the slice's endpoints, want the same array")
	}
	if len(diff.TriggerTimes) != 1 || !diff.TriggerTimes[0].Equal(info.trigger) {
		t.Errorf("trigger times %v", diff.TriggerTimes)
	}
}

// A slice with several ports keeps its endpoints once; the merge gives
// each port its own copy with the port set.
func TestSliceInfoMultiPort(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	s := makeSlice("svc", "svc-1", []sliceEP{ep("10.0.0.2"), ep("10.0.0.1")},
		slicePortSpec("http", 8080, v1.ProtocolTCP), slicePortSpec("dns", 5353, v1.ProtocolUDP))
	obj, _ := snap.compact(s)
	info := obj.(*sliceInfo)
	wantPorts := []slicePort{{"http", v1.ProtocolTCP, 8080}, {"dns", v1.ProtocolUDP, 5353}}
	if d := cmp.Diff(wantPorts, info.ports, cmp.AllowUnexported(slicePort{})); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
	if len(info.endpoints) != 2 || info.endpoints[0].Port != 0 || info.endpoints[0].IP != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("endpoints %v, want both, sorted, port unset", info.endpoints)
	}
	snap.Endpoints.update(info, false)
	st, _ := snap.Snapshot()
	want := map[ServicePortName][]Endpoint{
		httpPort("svc"):                   {readyEP("10.0.0.1", 8080), readyEP("10.0.0.2", 8080)},
		spn("svc", "dns", v1.ProtocolUDP): {readyEP("10.0.0.1", 5353), readyEP("10.0.0.2", 5353)},
	}
	if d := cmp.Diff(want, st.Endpoints, cmpAddrs); d != "" {
		t.Errorf("State endpoints (-want +got):\n%s", d)
	}
}

// Strings repeated across objects are kept once, however many decoded
// copies arrive: node names, zones, hints, namespaces, port names.
func TestCompactFormsInternStrings(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	decoded := func() *discovery.EndpointSlice {
		s := makeSlice("svc", "svc-1", []sliceEP{ep("10.0.0.1").on("node-b").inZone("z2", "z2")})
		data, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out := &discovery.EndpointSlice{}
		if err := out.Unmarshal(data); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, _ := snap.compact(decoded())
	b, _ := snap.compact(decoded())
	ea, eb := a.(*sliceInfo).endpoints[0], b.(*sliceInfo).endpoints[0]
	same := func(what, x, y string) {
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are two copies", what, x, y)
		}
	}
	same("node name", ea.NodeName, eb.NodeName)
	same("zone", ea.Zone(), eb.Zone())
	same("zone hint", ea.ZoneHints()[0], eb.ZoneHints()[0])
	if ea.Topology != eb.Topology {
		t.Error("two slices' endpoints with the same zone and hints do not share their topology")
	}
	same("namespace", a.(*sliceInfo).namespace, b.(*sliceInfo).namespace)
	same("port name", a.(*sliceInfo).ports[0].name, b.(*sliceInfo).ports[0].name)
}

// The transform is idempotent (client-go may hand it an object from its
// cache) and leaves tombstones and other objects to trimObject.
func TestCompactIdempotent(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	svc, _ := snap.compact(makeService("web"))
	slice, _ := snap.compact(makeSlice("web", "web-1", []sliceEP{ep("10.0.0.1")}))
	for _, obj := range []any{svc, slice} {
		if got, err := snap.compact(obj); err != nil || got != obj {
			t.Errorf("compact(%T) = %v, %v; want it unchanged", obj, got, err)
		}
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: svc}
	if got, err := snap.compact(tomb); err != nil || got != tomb {
		t.Errorf("tombstone: got %v, %v", got, err)
	}
}

// Malformed objects reach the cache in compact form with their bad parts
// skipped and counted, never a crash; a slice without its Service label
// is reported when it reaches the tracker, as before.
func TestCompactMalformed(t *testing.T) {
	rec := &invalidRecorder{}
	p := New(nil, nopBackend{}, Config{NodeName: "node-a"}, nil, nil, nil)
	p.snap.Services.invalid, p.snap.Endpoints.invalid = rec.fn, rec.fn
	badSvc := makeService("bad", withClusterIPs("not-an-ip"))
	noLabel := makeSlice("x", "orphan", []sliceEP{ep("10.0.0.1")})
	noLabel.Labels = nil
	badSlice := makeSlice("web", "web-1", []sliceEP{{}, ep("10.0.0.1")}, discovery.EndpointPort{})
	for _, obj := range []any{badSvc, noLabel, badSlice} {
		c, err := p.informerTransform(obj)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := c.(*serviceInfo); ok {
			p.serviceHandler().OnAdd(s, true)
		} else {
			p.sliceHandler().OnAdd(c, true)
		}
	}
	want := []string{"Service/cluster-ip", "EndpointSlice/service-name", "EndpointSlice/port", "Endpoint/address"}
	if d := cmp.Diff(want, rec.got()); d != "" {
		t.Errorf("invalid calls (-want +got):\n%s", d)
	}
	st, _ := p.snap.Snapshot()
	if len(st.Services) != 0 || len(st.Endpoints) != 0 {
		t.Errorf("state %v %v, want empty", st.Services, st.Endpoints)
	}
}

// A real shared informer with the proxier's transform keeps only compact
// forms in its cache, and updates and deletions reach the trackers.
func TestInformerCacheHoldsCompactForms(t *testing.T) {
	client := fake.NewClientset(makeService("web"), makeSlice("web", "web-1", []sliceEP{ep("10.0.0.1")}))
	p := New(kubeclientset.New(client), nopBackend{}, Config{NodeName: "node-a"}, nil, nil, nil)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(p.informerTransform))
	svcInf := factory.Core().V1().Services().Informer()
	sliceInf := factory.Discovery().V1().EndpointSlices().Informer()
	if _, err := svcInf.AddEventHandler(p.serviceHandler()); err != nil {
		t.Fatal(err)
	}
	if _, err := sliceInf.AddEventHandler(p.sliceHandler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer factory.Shutdown()
	defer cancel() // before Shutdown, which waits for the informers to stop
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	for _, obj := range append(svcInf.GetStore().List(), sliceInf.GetStore().List()...) {
		switch obj.(type) {
		case *serviceInfo, *sliceInfo:
		default:
			t.Errorf("informer cache holds a %T", obj)
		}
	}
	waitForPending(t, p, 1, 1)
	st, _ := p.snap.Snapshot()
	if !hasEndpoints(st, httpPort("web"), "10.0.0.1:8080") {
		t.Fatalf("endpoints after the initial list: %v", st.Endpoints)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(testNS).Update(ctx, makeSlice("web", "web-1", []sliceEP{ep("10.0.0.2")}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Services(testNS).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPending(t, p, 1, 1)
	st, diff := p.snap.Snapshot()
	if len(st.Services) != 0 || !hasEndpoints(st, httpPort("web"), "10.0.0.2:8080") {
		t.Errorf("after the update and delete: services %v endpoints %v", st.Services, st.Endpoints)
	}
	if _, ok := diff.Deleted[httpPort("web")]; !ok || len(diff.StaleEndpoints) != 1 {
		t.Errorf("diff: deleted %v stale %v", diff.Deleted, diff.StaleEndpoints)
	}
}

// Removing a slice through the v1 entry point converts nothing (its bad
// parts are not reported twice) and still reports its trigger time.
func TestSliceRemovalByName(t *testing.T) {
	rec := &invalidRecorder{}
	snap := NewSnapshotter("node-a", rec.fn)
	s := makeSlice("svc", "svc-1", []sliceEP{ep("10.0.0.1"), ep("bad")})
	snap.Endpoints.Update(s, false)
	snap.Snapshot()
	when := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: when.Format(time.RFC3339Nano)}
	if !snap.Endpoints.Update(s, true) {
		t.Fatal("removal left no change pending")
	}
	st, diff := snap.Snapshot()
	if len(st.Endpoints) != 0 || len(diff.StaleEndpoints) != 1 {
		t.Errorf("after removal: endpoints %v, stale %v", st.Endpoints, diff.StaleEndpoints)
	}
	if len(diff.TriggerTimes) != 1 || !diff.TriggerTimes[0].Equal(when) {
		t.Errorf("trigger times %v, want [%v]", diff.TriggerTimes, when)
	}
	if d := cmp.Diff([]string{"Endpoint/address"}, rec.got()); d != "" {
		t.Errorf("invalid calls (-want +got):\n%s", d)
	}
}
