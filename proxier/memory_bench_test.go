package proxier

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// BenchmarkCoreLiveHeap measures the live heap of the shared core at the
// sizes of issue 25: the informer caches, the change trackers and the
// State, built from objects decoded from protobuf (as the daemon gets
// them from the apiserver) and passed through the informers' transform,
// store and event handlers.
//
// Reported per run:
//   - live-B/svc: the heap the Services add (cache, tracker, State), per
//     Service, measured before any EndpointSlice arrives;
//   - live-B/ep: the heap the EndpointSlices then add, per endpoint;
//   - live-MiB: both together;
//   - pending-MiB: the live heap just before the slices' snapshot, with
//     every slice a pending change (as after the initial list).
//
// Run with:
//
//	go test ./proxier -run '^$' -bench CoreLiveHeap -benchmem -benchtime 1x
func BenchmarkCoreLiveHeap(b *testing.B) {
	for _, size := range []struct{ services, endpoints, ports int }{{10000, 10, 1}, {5000, 50, 1}, {44000, 1, 2}} {
		b.Run(fmt.Sprintf("%dx%dx%d", size.services, size.endpoints, size.ports), func(b *testing.B) {
			w := encodeWorkload(b, size.services, size.endpoints, size.ports)
			b.ReportAllocs()
			b.ResetTimer()
			var svcHeap, epHeap, total, pending float64
			for range b.N {
				s, e, p := w.build(b)
				svcHeap += float64(s)
				epHeap += float64(e)
				total += float64(s + e)
				pending += float64(p)
			}
			n := float64(b.N)
			b.ReportMetric(svcHeap/n/float64(size.services), "live-B/svc")
			b.ReportMetric(epHeap/n/float64(size.services*size.endpoints), "live-B/ep")
			b.ReportMetric(total/n/(1<<20), "live-MiB")
			b.ReportMetric(pending/n/(1<<20), "pending-MiB")
		})
	}
}

// benchNode is the node the benchmark's proxier runs on; one endpoint
// in a hundred is on it.
const benchNode = "node-000"

// workload is a set of Services and EndpointSlices in protobuf wire form.
type workload struct {
	services, slices [][]byte
	ports            int // per Service
}

func encodeWorkload(b *testing.B, services, perService, ports int) *workload {
	w := &workload{ports: ports}
	for i := range services {
		svc, slice := workloadObjects(i, perService, ports)
		w.services = append(w.services, mustMarshal(b, svc))
		w.slices = append(w.slices, mustMarshal(b, slice))
	}
	return w
}

func mustMarshal(b *testing.B, obj interface{ Marshal() ([]byte, error) }) []byte {
	data, err := obj.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// workloadObjects builds Service i of ports ports (http, http1, ...) and
// its one EndpointSlice with the fields the apiserver and the
// endpoint-slice controller fill in.
func workloadObjects(i, perService, ports int) (*v1.Service, *discovery.EndpointSlice) {
	name := fmt.Sprintf("svc-%05d", i)
	ns := fmt.Sprintf("ns-%03d", i%100)
	meta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Namespace: ns, Name: n, UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			ResourceVersion: fmt.Sprint(1000 + i), Generation: 1,
			CreationTimestamp: metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		}
	}
	svc := &v1.Service{ObjectMeta: meta(name), Spec: v1.ServiceSpec{
		Type:      v1.ServiceTypeClusterIP,
		ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), Selector: map[string]string{"app": name},
		SessionAffinity: v1.ServiceAffinityNone, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
		IPFamilyPolicy:        ptr.To(v1.IPFamilyPolicySingleStack),
		InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyCluster),
	}}
	svc.Labels = map[string]string{"app": name}
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	slice := &discovery.EndpointSlice{ObjectMeta: meta(name + "-abcde"), AddressType: discovery.AddressTypeIPv4}
	for p := range int32(ports) {
		pn := "http"
		if p > 0 {
			pn = fmt.Sprintf("http%d", p)
		}
		sp := v1.ServicePort{Name: pn, Protocol: v1.ProtocolTCP, Port: 80 + p}
		sp.TargetPort.IntVal = 8080 + p
		svc.Spec.Ports = append(svc.Spec.Ports, sp)
		slice.Ports = append(slice.Ports, discovery.EndpointPort{Name: ptr.To(pn), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(8080 + p)})
	}
	slice.GenerateName = name + "-"
	slice.Labels = map[string]string{discovery.LabelServiceName: name, discovery.LabelManagedBy: "endpointslice-controller.k8s.io"}
	slice.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}
	slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: svc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	for j := range perService {
		k := i*perService + j
		pod := fmt.Sprintf("%s-%08x", name, k)
		slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 1+k/62500, k/250%250, k%250+1)},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod, UID: types.UID(fmt.Sprintf("%036d", k))},
			NodeName:   ptr.To(fmt.Sprintf("node-%03d", k%100)),
			Zone:       ptr.To(fmt.Sprintf("zone-%d", k%3)),
		})
	}
	return svc, slice
}

// build feeds the workload through the core the way the informers do and
// returns the live heap the Services added, then what the slices added,
// and the heap while the slices were pending.
func (w *workload) build(b *testing.B) (services, endpoints, pending uint64) {
	b.StopTimer()
	base := liveHeap(nil)
	b.StartTimer()
	p := New(nil, nopBackend{}, Config{NodeName: benchNode}, nil, nil, nil)
	svcStore := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
	feed(b, w.services, func() decodable { return &v1.Service{} }, p.informerTransform, svcStore, p.serviceHandler())
	st, _ := p.snap.Snapshot()
	b.StopTimer()
	withServices := liveHeap(st)
	b.StartTimer()
	st = nil
	sliceStore := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
	feed(b, w.slices, func() decodable { return &discovery.EndpointSlice{} }, p.informerTransform, sliceStore, p.sliceHandler())
	b.StopTimer()
	pending = liveHeap([]any{p, svcStore, sliceStore}) - base
	b.StartTimer()
	st, _ = p.snap.Snapshot()
	b.StopTimer()
	if n := len(w.services) * w.ports; len(st.Services) != n || len(st.Endpoints) != n {
		b.Fatalf("state has %d service ports and %d endpoint lists, want %d", len(st.Services), len(st.Endpoints), n)
	}
	all := liveHeap([]any{p, st, svcStore, sliceStore})
	b.StartTimer()
	return withServices - base, all - withServices, pending
}

type decodable interface{ Unmarshal([]byte) error }

// feed is what an informer does with each listed object: transform it,
// store it, tell the handlers.
func feed(b *testing.B, wire [][]byte, newObj func() decodable, transform cache.TransformFunc, store cache.Store, h cache.ResourceEventHandler) {
	for _, data := range wire {
		obj := newObj()
		if err := obj.Unmarshal(data); err != nil {
			b.Fatal(err)
		}
		t, err := transform(obj)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Add(t); err != nil {
			b.Fatal(err)
		}
		h.OnAdd(t, true)
	}
}

type nopBackend struct{}

func (nopBackend) Name() string { return "nop" }
func (nopBackend) Sync(context.Context, *State, *Diff) (SyncResult, error) {
	return SyncResult{}, nil
}
func (nopBackend) Cleanup(context.Context) error { return nil }
