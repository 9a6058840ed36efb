package proxier

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

func ipv6Slice(svc, name string, eps ...sliceEP) *discovery.EndpointSlice {
	s := makeSlice(svc, name, eps)
	s.AddressType = discovery.AddressTypeIPv6
	return s
}

// TestFamilyFilter: on a single-stack node, Services and slices of the
// other family are skipped (counted, per kind and family); a dual-stack
// Service keeps its programmed family; a Service changed to the other
// family only leaves the state.
func TestFamilyFilter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    []v1.IPFamily
		want    []string // service ports in the state
		wantEPs map[string][]string
		skipped map[string]int
	}{
		{"ipv4-only node", []v1.IPFamily{v1.IPv4Protocol}, []string{"ns/dual:http/TCP", "ns/v4:http/TCP"},
			map[string][]string{"dual": {"10.0.0.1:8080"}, "v4": {"10.0.0.2:8080"}},
			map[string]int{"Service/IPv6": 1, "EndpointSlice/IPv6": 2}},
		{"ipv6-only node", []v1.IPFamily{v1.IPv6Protocol}, []string{"ns/dual:http/TCP", "ns/v6:http/TCP"},
			map[string][]string{"dual": {"[fd00::1]:8080"}, "v6": {"[fd00::3]:8080"}},
			map[string]int{"Service/IPv4": 1, "EndpointSlice/IPv4": 2}},
		{"dual-stack node", []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, []string{"ns/dual:http/TCP", "ns/v4:http/TCP", "ns/v6:http/TCP"},
			map[string][]string{"dual": {"10.0.0.1:8080", "[fd00::1]:8080"}, "v4": {"10.0.0.2:8080"}, "v6": {"[fd00::3]:8080"}},
			map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			skipped := map[string]int{}
			snap := NewSnapshotter("node-a", nil)
			snap.SetFamilies(tc.node, func(kind string, f v1.IPFamily) { skipped[kind+"/"+string(f)]++ })
			snap.Services.Update(nil, makeService("dual", withClusterIPs("10.96.0.1", "fd00:96::1")))
			snap.Services.Update(nil, makeService("v4", withClusterIPs("10.96.0.2")))
			snap.Services.Update(nil, makeService("v6", withClusterIPs("fd00:96::3")))
			snap.Endpoints.Update(makeSlice("dual", "d4", []sliceEP{ep("10.0.0.1")}), false)
			snap.Endpoints.Update(ipv6Slice("dual", "d6", ep("fd00::1")), false)
			snap.Endpoints.Update(makeSlice("v4", "a", []sliceEP{ep("10.0.0.2")}), false)
			snap.Endpoints.Update(ipv6Slice("v6", "b", ep("fd00::3")), false)
			st, _ := snap.Snapshot()
			if d := cmp.Diff(tc.want, nameSet(keysOf(st.Services))); d != "" {
				t.Errorf("service ports (-want +got):\n%s", d)
			}
			for svc, want := range tc.wantEPs {
				if d := cmp.Diff(want, endpointKeys(st.Endpoints[httpPort(svc)])); d != "" {
					t.Errorf("%s endpoints (-want +got):\n%s", svc, d)
				}
			}
			if d := cmp.Diff(tc.skipped, skipped); d != "" {
				t.Errorf("skipped (-want +got):\n%s", d)
			}
		})
	}
}

func TestFamilyFilterServiceChangesFamily(t *testing.T) {
	snap := NewSnapshotter("node-a", nil)
	snap.SetFamilies([]v1.IPFamily{v1.IPv4Protocol}, nil)
	old := makeService("svc", withClusterIPs("10.96.0.1"))
	snap.Services.Update(nil, old)
	if st, _ := snap.Snapshot(); st.Services[httpPort("svc")] == nil {
		t.Fatal("the IPv4 service is not in the state")
	}
	snap.Services.Update(old, makeService("svc", withClusterIPs("fd00:96::1")))
	st, diff := snap.Snapshot()
	if st.Services[httpPort("svc")] != nil || len(diff.Changed) != 1 {
		t.Errorf("after the change to IPv6 only: state %v, changed %v", st.Services, nameSet(diff.Changed))
	}
}

// Headless and invalid Services are not the filter's to report.
func TestFamilyFilterLeavesOthersToConversion(t *testing.T) {
	f := newFamilyFilter([]v1.IPFamily{v1.IPv4Protocol}, func(string, v1.IPFamily) { t.Error("reported") })
	for name, svc := range map[string]*v1.Service{
		"headless":        makeService("h", withClusterIPs(v1.ClusterIPNone)),
		"bad cluster IP":  makeService("b", withClusterIPs("not-an-ip")),
		"external name":   makeService("e", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName }),
		"programmed (v4)": makeService("v4"),
	} {
		if f.skipsService(svc) {
			t.Errorf("%s: skipped", name)
		}
	}
	var nilFilter *familyFilter
	if nilFilter.skipsService(makeService("v6", withClusterIPs("fd00::1"))) || nilFilter.skipsSlice(ipv6Slice("x", "y")) {
		t.Error("a nil filter skips")
	}
}

func keysOf[V any](m map[ServicePortName]V) map[ServicePortName]struct{} {
	out := make(map[ServicePortName]struct{}, len(m))
	for k := range m {
		out[k] = struct{}{}
	}
	return out
}
