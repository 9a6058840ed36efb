package proxier

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSnapshotServiceAndEndpointChanges(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	snap.Services.Update(nil, makeService("svc"))
	snap.Endpoints.Update(makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")}), false)
	st, diff := snap.Snapshot()
	if !diff.ServicesChanged || diff.Full {
		t.Errorf("first snapshot: ServicesChanged=%v Full=%v, want true/false", diff.ServicesChanged, diff.Full)
	}
	if d := cmp.Diff([]string{"ns/svc:http/TCP"}, nameSet(diff.Changed)); d != "" {
		t.Errorf("Changed (-want +got):\n%s", d)
	}
	if got := endpointKeys(st.Endpoints[httpPort("svc")]); len(got) != 1 || st.Services[httpPort("svc")] == nil {
		t.Errorf("state: services %v endpoints %v", st.Services, got)
	}
	if st.Node.Name != "node-a" {
		t.Errorf("State.Node.Name = %q, want node-a", st.Node.Name)
	}
	_, diff = snap.Snapshot()
	if len(diff.Changed) != 0 || diff.ServicesChanged || len(diff.StaleEndpoints) != 0 {
		t.Errorf("snapshot without changes: %+v, want empty", diff)
	}
}

// A snapshot updates the trackers' maps in place (no copy per change)
// and its Diff says what the previous one held of each changed name.
func TestSnapshotUpdatesInPlace(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	snap.Services.Update(nil, makeService("svc"))
	snap.Endpoints.Update(makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")}), false)
	for i := range 8 { // a map a few changes do not double
		name := fmt.Sprintf("bg%d", i)
		snap.Services.Update(nil, makeService(name, withClusterIPs(fmt.Sprintf("10.96.1.%d", i+1))))
		snap.Endpoints.Update(makeSlice(name, "b", []sliceEP{ep(fmt.Sprintf("10.0.2.%d", i+1))}), false)
	}
	st1, d1 := snap.Snapshot()
	if sp, eps := d1.Previous(st1, httpPort("svc")); sp != nil || eps != nil {
		t.Errorf("a new port's previous = %v, %v, want none", sp, eps)
	}
	svc1 := st1.Services[httpPort("svc")]

	snap.Services.Update(nil, makeService("other", withClusterIPs("10.96.0.20")))
	st2, d2 := snap.Snapshot()
	if !sameMap(st1.Endpoints, st2.Endpoints) {
		t.Errorf("a snapshot without endpoint changes copied the endpoints map")
	}
	if sp, eps := d2.Previous(st2, httpPort("svc")); sp != svc1 || len(eps) != 1 {
		t.Errorf("an unchanged port's previous = %v, %v, want as it is", sp, eps)
	}
	snap.Endpoints.Update(makeSlice("svc", "s2", []sliceEP{ep("10.0.0.2")}), false)
	snap.Services.Update(makeService("other", withClusterIPs("10.96.0.20")), nil)
	st3, d3 := snap.Snapshot()
	if got := endpointKeys(st3.Endpoints[httpPort("svc")]); !cmp.Equal(got, []string{"10.0.0.1:8080", "10.0.0.2:8080"}) {
		t.Errorf("endpoints after the second slice = %v", got)
	}
	if !sameMap(st2.Services, st3.Services) || !sameMap(st2.Endpoints, st3.Endpoints) {
		t.Errorf("a snapshot copied the maps")
	}
	sp, eps := d3.Previous(st3, httpPort("svc"))
	if got := endpointKeys(eps); sp != svc1 || !cmp.Equal(got, []string{"10.0.0.1:8080"}) {
		t.Errorf("previous of an endpoint change = %v, %v, want the service and 10.0.0.1:8080", sp, got)
	}
	if sp, _ := d3.Previous(st3, httpPort("other")); sp == nil || st3.Services[httpPort("other")] != nil {
		t.Errorf("a deleted port: previous %v, now %v", sp, st3.Services[httpPort("other")])
	}
}

// A Diff merged from a failed sync keeps what the last successful one saw.
func TestDiffMergeKeepsPrevious(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	snap.Services.Update(nil, makeService("svc"))
	snap.Endpoints.Update(makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")}), false)
	st0, _ := snap.Snapshot() // synced
	svc0 := st0.Services[httpPort("svc")]

	// Failed: an endpoint change, and a new Service.
	snap.Endpoints.Update(makeSlice("svc", "s1", []sliceEP{ep("10.0.0.9")}), false)
	snap.Services.Update(nil, makeService("new", withClusterIPs("10.96.0.30")))
	_, failed := snap.Snapshot()
	// Then: the Service changes, the endpoints again, the new one's too.
	snap.Services.Update(makeService("svc"), makeService("svc", withClusterIPs("10.96.0.99")))
	snap.Endpoints.Update(makeSlice("svc", "s1", []sliceEP{ep("10.0.0.7")}), false)
	snap.Endpoints.Update(makeSlice("new", "n1", []sliceEP{ep("10.0.1.1")}), false)
	st, d := snap.Snapshot()
	d.Merge(failed)
	sp, eps := d.Previous(st, httpPort("svc"))
	if got := endpointKeys(eps); sp != svc0 || !cmp.Equal(got, []string{"10.0.0.1:8080"}) {
		t.Errorf("previous of svc = %v, %v, want as first synced", sp, got)
	}
	if sp, eps := d.Previous(st, httpPort("new")); sp != nil || eps != nil {
		t.Errorf("previous of a port new since the last sync = %v, %v, want none", sp, eps)
	}
}

// sameMap tells whether two maps are the same map (not equal contents).
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func makeNode(name, zone string, ips ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "worker"}}}
	if zone != "" {
		n.Labels[v1.LabelTopologyZone] = zone
	}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	return n
}

func TestSnapshotterUpdateNode(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	if snap.UpdateNode(nil) {
		t.Errorf("UpdateNode(nil) = true")
	}
	steps := []struct {
		name      string
		node      *v1.Node
		wantChg   bool
		wantZone  string
		wantAddrs []netip.Addr
		wantLabel string
	}{
		{"zone and address set", makeNode("node-a", "z1", "192.168.0.1"), true, "z1", addrs("192.168.0.1"), "worker"},
		{"label-only change", func() *v1.Node { n := makeNode("node-a", "z1", "192.168.0.1"); n.Labels["role"] = "db"; return n }(),
			false, "z1", addrs("192.168.0.1"), "db"},
		{"zone change", makeNode("node-a", "z2", "192.168.0.1"), true, "z2", addrs("192.168.0.1"), "worker"},
		{"address change", makeNode("node-a", "z2", "192.168.0.1", "192.168.0.2"), true, "z2", addrs("192.168.0.1", "192.168.0.2"), "worker"},
	}
	for _, s := range steps {
		if got := snap.UpdateNode(s.node); got != s.wantChg {
			t.Errorf("%s: UpdateNode = %v, want %v", s.name, got, s.wantChg)
		}
		st, diff := snap.Snapshot()
		if diff.Full != s.wantChg {
			t.Errorf("%s: Diff.Full = %v, want %v", s.name, diff.Full, s.wantChg)
		}
		if st.Node.Name != "node-a" || st.Node.Zone != s.wantZone || st.Node.Labels["role"] != s.wantLabel ||
			!cmp.Equal(st.Node.Addresses, s.wantAddrs, cmpAddrs) {
			t.Errorf("%s: State.Node = %+v", s.name, st.Node)
		}
		if _, diff := snap.Snapshot(); diff.Full {
			t.Errorf("%s: Full stays set in the following snapshot", s.name)
		}
	}
}

func TestNodeInfoFromNode(t *testing.T) {
	n := makeNode("node-a", "z1")
	n.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "node-a"},
		{Type: v1.NodeInternalIP, Address: "192.168.0.1"},
		{Type: v1.NodeExternalIP, Address: "203.0.113.1"},
		{Type: v1.NodeInternalIP, Address: "192.168.0.1"},
		{Type: v1.NodeInternalIP, Address: "::ffff:192.168.0.1"},
		{Type: v1.NodeInternalIP, Address: "fd00::1"},
		{Type: v1.NodeInternalIP, Address: "garbage"},
		{Type: v1.NodeInternalDNS, Address: "node-a.local"},
	}
	got := NodeInfoFromNode(n)
	if d := cmp.Diff(addrs("192.168.0.1", "203.0.113.1", "fd00::1"), got.Addresses, cmpAddrs); d != "" {
		t.Errorf("Addresses (-want +got):\n%s", d)
	}
	if got.Name != "node-a" || got.Zone != "z1" {
		t.Errorf("NodeInfo = %+v", got)
	}
	n.Spec.PodCIDRs = []string{"10.244.1.7/24", "bogus", "fd00:10:244:1::/64"}
	want := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	if got := NodeInfoFromNode(n).PodCIDRs; !slices.Equal(got, want) {
		t.Errorf("PodCIDRs = %v, want %v", got, want)
	}
	// A pod CIDR arriving later asks for a full sync.
	s := NewSnapshotter("node-a", nil)
	n.Spec.PodCIDRs = nil
	s.UpdateNode(n)
	s.Snapshot()
	n.Spec.PodCIDRs = []string{"10.244.1.0/24"}
	if !s.UpdateNode(n) {
		t.Error("a new pod CIDR was not seen as a node change")
	}
	// NodeCIDR local-traffic detection renders from State.Node.PodCIDRs:
	// the full sync carries the new ones.
	if st, diff := s.Snapshot(); !diff.Full || DetectByNodeCIDR().Match(v1.IPv4Protocol, st.Node).CIDR != want[0] {
		t.Errorf("after a pod CIDR change: Full=%v, NodeCIDR match %v", diff.Full, DetectByNodeCIDR().Match(v1.IPv4Protocol, st.Node))
	}
}

func newDiff() *Diff {
	return &Diff{Changed: map[ServicePortName]struct{}{}, Deleted: map[ServicePortName]*ServicePort{}, NewlyServing: map[ServicePortName]struct{}{}}
}

func TestDiffMerge(t *testing.T) {
	a, b, x := httpPort("a"), httpPort("b"), httpPort("x")
	dnsA := spn("a", "dns", v1.ProtocolUDP)
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	staleA := StaleEndpoint{Name: a, Endpoint: readyEP("10.0.0.1", 80)}
	staleB := StaleEndpoint{Name: b, Endpoint: readyEP("10.0.0.2", 80)}
	xPort := &ServicePort{Name: x}

	earlier := newDiff()
	earlier.Full = true
	earlier.ServicesChanged = true
	earlier.Changed[a], earlier.Changed[x], earlier.Changed[dnsA] = struct{}{}, struct{}{}, struct{}{}
	earlier.Deleted[x] = xPort
	earlier.NewlyServing[dnsA] = struct{}{}
	earlier.StaleEndpoints = []StaleEndpoint{staleA}
	earlier.TriggerTimes = []time.Time{t1}

	later := newDiff()
	later.Changed[b] = struct{}{}
	later.Changed[x] = struct{}{} // x had only an endpoint change since
	later.StaleEndpoints = []StaleEndpoint{staleB}
	later.TriggerTimes = []time.Time{t2}

	later.Merge(earlier)
	if !later.Full || !later.ServicesChanged {
		t.Errorf("Full=%v ServicesChanged=%v, want true/true", later.Full, later.ServicesChanged)
	}
	if d := cmp.Diff([]string{"ns/a:dns/UDP", "ns/a:http/TCP", "ns/b:http/TCP", "ns/x:http/TCP"}, nameSet(later.Changed)); d != "" {
		t.Errorf("Changed (-want +got):\n%s", d)
	}
	if later.Deleted[x] != xPort || len(later.Deleted) != 1 {
		t.Errorf("Deleted = %v, want x kept deleted", later.Deleted)
	}
	if d := cmp.Diff([]string{"ns/a:dns/UDP"}, nameSet(later.NewlyServing)); d != "" {
		t.Errorf("NewlyServing (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]StaleEndpoint{staleA, staleB}, later.StaleEndpoints, cmpAddrs); d != "" {
		t.Errorf("StaleEndpoints (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]time.Time{t1, t2}, later.TriggerTimes); d != "" {
		t.Errorf("TriggerTimes (-want +got):\n%s", d)
	}

	// x re-created: the new State has it, so it is not deleted any more.
	later.DropRestored(&State{Services: map[ServicePortName]*ServicePort{x: {Name: x}}})
	if len(later.Deleted) != 0 {
		t.Errorf("after DropRestored Deleted = %v, want empty", later.Deleted)
	}

	before := *later
	later.Merge(nil)
	if len(later.StaleEndpoints) != len(before.StaleEndpoints) || later.Full != before.Full {
		t.Errorf("Merge(nil) changed the diff")
	}
}

// TestDiffMergeAcrossFailedSync drives the snapshotter the way the proxier
// does when a backend fails: the failed diff is merged into the next one.
func TestDiffMergeAcrossFailedSync(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	svc := makeService("svc")
	two := makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1"), ep("10.0.0.2")})
	snap.Services.Update(nil, svc)
	snap.Endpoints.Update(two, false)
	snap.Snapshot()

	// Sync 1 (fails): an endpoint goes away and the service is deleted.
	snap.Endpoints.Update(makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")}), false)
	snap.Services.Update(svc, nil)
	_, failed := snap.Snapshot()

	// Sync 2: only the (now orphaned) slice is deleted.
	snap.Endpoints.Update(two, true)
	st, diff := snap.Snapshot()
	diff.Merge(failed)
	diff.DropRestored(st)
	if d := cmp.Diff([]string{"ns/svc:http=10.0.0.1:8080", "ns/svc:http=10.0.0.2:8080"}, staleKeys(diff.StaleEndpoints)); d != "" {
		t.Errorf("StaleEndpoints (-want +got):\n%s", d)
	}
	if _, ok := diff.Deleted[httpPort("svc")]; !ok || !diff.ServicesChanged {
		t.Errorf("Deleted = %v ServicesChanged = %v: the deletion of the failed sync was lost", diff.Deleted, diff.ServicesChanged)
	}
}

func TestDiffIsChanged(t *testing.T) {
	d := newDiff()
	d.Changed[httpPort("a")] = struct{}{}
	var nilDiff *Diff
	tests := []struct {
		name string
		diff *Diff
		port ServicePortName
		want bool
	}{
		{"nil diff", nilDiff, httpPort("b"), true},
		{"changed", d, httpPort("a"), true},
		{"unchanged", d, httpPort("b"), false},
		{"full", &Diff{Full: true}, httpPort("b"), true},
	}
	for _, tc := range tests {
		if got := tc.diff.IsChanged(tc.port); got != tc.want {
			t.Errorf("%s: IsChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
