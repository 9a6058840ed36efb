package proxier

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// readyEP is the Endpoint a slice endpoint with no conditions becomes.
func readyEP(ip string, port uint16) Endpoint {
	return Endpoint{IP: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true}
}

// endpointsAfter feeds the slices to a fresh tracker for node "node-a" and
// returns the snapshot's endpoints and the InvalidFunc calls.
func endpointsAfter(t *testing.T, slices ...*discovery.EndpointSlice) (map[ServicePortName][]Endpoint, []string) {
	t.Helper()
	rec := &invalidRecorder{}
	snap := NewSnapshotter("node-a", rec.fn)
	for _, s := range slices {
		snap.Endpoints.Update(s, false)
	}
	st, _ := snap.Snapshot()
	return st.Endpoints, rec.got()
}

// sliceCase feeds slices to a tracker for node-a and expects the merged
// endpoints and the InvalidFunc calls.
type sliceCase struct {
	name        string
	slices      []*discovery.EndpointSlice
	want        map[ServicePortName][]Endpoint
	wantInvalid []string
}

func runSliceCases(t *testing.T, tests []sliceCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, invalid := endpointsAfter(t, tc.slices...)
			if d := cmp.Diff(tc.want, got, cmpAddrs); d != "" {
				t.Errorf("endpoints (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantInvalid, invalid); d != "" {
				t.Errorf("invalid calls (-want +got):\n%s", d)
			}
		})
	}
}

func TestEndpointSliceConversion(t *testing.T) {
	runSliceCases(t, []sliceCase{{
		name:   "nil conditions mean ready and serving; sorted by IP",
		slices: []*discovery.EndpointSlice{makeSlice("svc", "s1", []sliceEP{ep("10.0.0.2"), ep("10.0.0.1")})},
		want:   map[ServicePortName][]Endpoint{httpPort("svc"): {readyEP("10.0.0.1", 8080), readyEP("10.0.0.2", 8080)}},
	}, {
		name: "explicit conditions, serving-terminating, not ready, nil serving follows the API (true)",
		slices: []*discovery.EndpointSlice{makeSlice("svc", "s1", []sliceEP{
			ep("10.0.0.1").servingTerminating(),
			ep("10.0.0.2").notReady(),
			{addrs: []string{"10.0.0.3"}, ready: ptr.To(false)},
		})},
		want: map[ServicePortName][]Endpoint{httpPort("svc"): {
			{IP: netip.MustParseAddr("10.0.0.1"), Port: 8080, Serving: true, Terminating: true},
			{IP: netip.MustParseAddr("10.0.0.2"), Port: 8080},
			{IP: netip.MustParseAddr("10.0.0.3"), Port: 8080, Serving: true},
		}},
	}, {
		name: "node name gives IsLocal; zone and hints kept",
		slices: []*discovery.EndpointSlice{makeSlice("svc", "s1", []sliceEP{
			ep("10.0.0.1").on("node-a").inZone("z1", "z1", "z2").forNodes("node-a"),
			ep("10.0.0.2").on("node-b").inZone("z2"),
		})},
		want: map[ServicePortName][]Endpoint{httpPort("svc"): {
			{IP: netip.MustParseAddr("10.0.0.1"), Port: 8080, Ready: true, Serving: true, NodeName: "node-a", IsLocal: true,
				Topology: &EndpointTopology{Zone: "z1", ZoneHints: []string{"z1", "z2"}, NodeHints: []string{"node-a"}}},
			{IP: netip.MustParseAddr("10.0.0.2"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b", Topology: &EndpointTopology{Zone: "z2"}},
		}},
	}, {
		name: "several slices of one service merge",
		slices: []*discovery.EndpointSlice{
			makeSlice("svc", "s1", []sliceEP{ep("10.0.0.3")}),
			makeSlice("svc", "s2", []sliceEP{ep("10.0.0.1"), ep("10.0.0.2")}),
		},
		want: map[ServicePortName][]Endpoint{httpPort("svc"): {
			readyEP("10.0.0.1", 8080), readyEP("10.0.0.2", 8080), readyEP("10.0.0.3", 8080),
		}},
	}, {
		name: "duplicate across slices: the ready copy wins (ready copy in the later slice)",
		slices: []*discovery.EndpointSlice{
			makeSlice("svc", "a", []sliceEP{ep("10.0.0.1").notReady()}),
			makeSlice("svc", "b", []sliceEP{ep("10.0.0.1").on("node-b")}),
		},
		want: map[ServicePortName][]Endpoint{httpPort("svc"): {
			{IP: netip.MustParseAddr("10.0.0.1"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b"},
		}},
	}, {
		name: "duplicate across slices: the ready copy wins (ready copy in the earlier slice)",
		slices: []*discovery.EndpointSlice{
			makeSlice("svc", "a", []sliceEP{ep("10.0.0.1").on("node-b")}),
			makeSlice("svc", "b", []sliceEP{ep("10.0.0.1").servingTerminating()}),
		},
		want: map[ServicePortName][]Endpoint{httpPort("svc"): {
			{IP: netip.MustParseAddr("10.0.0.1"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b"},
		}},
	}, {
		name: "duplicate: serving-terminating beats not serving",
		slices: []*discovery.EndpointSlice{
			makeSlice("svc", "a", []sliceEP{ep("10.0.0.1").notReady()}),
			makeSlice("svc", "b", []sliceEP{ep("10.0.0.1").servingTerminating()}),
		},
		want: map[ServicePortName][]Endpoint{httpPort("svc"): {
			{IP: netip.MustParseAddr("10.0.0.1"), Port: 8080, Serving: true, Terminating: true},
		}},
	}, {
		name: "multi-port slice: every port gets the endpoints",
		slices: []*discovery.EndpointSlice{makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")},
			slicePortSpec("http", 8080, v1.ProtocolTCP), slicePortSpec("dns", 5353, v1.ProtocolUDP),
			discovery.EndpointPort{Port: ptr.To[int32](9000)}, // unnamed, protocol defaults to TCP
		)},
		want: map[ServicePortName][]Endpoint{
			httpPort("svc"):                   {readyEP("10.0.0.1", 8080)},
			spn("svc", "dns", v1.ProtocolUDP): {readyEP("10.0.0.1", 5353)},
			spn("svc", "", v1.ProtocolTCP):    {readyEP("10.0.0.1", 9000)},
		},
	}, {
		name: "only the first address of an endpoint is used",
		slices: []*discovery.EndpointSlice{makeSlice("svc", "s1", []sliceEP{
			{addrs: []string{"10.0.0.1", "10.0.0.9"}},
		})},
		want: map[ServicePortName][]Endpoint{httpPort("svc"): {readyEP("10.0.0.1", 8080)}},
	}})
}

func v6Slice(s *discovery.EndpointSlice) *discovery.EndpointSlice {
	s.AddressType = discovery.AddressTypeIPv6
	return s
}

func TestEndpointSliceSkipped(t *testing.T) {
	runSliceCases(t, []sliceCase{{
		name: "bad endpoints skipped one by one",
		slices: []*discovery.EndpointSlice{makeSlice("svc", "s1", []sliceEP{
			{}, // no address
			ep("10.0.0.400"),
			ep("fd00::1"), // IPv6 in an IPv4 slice
			ep("0.0.0.0"),
			ep("10.0.0.1"),
		})},
		want:        map[ServicePortName][]Endpoint{httpPort("svc"): {readyEP("10.0.0.1", 8080)}},
		wantInvalid: []string{"Endpoint/address", "Endpoint/address", "Endpoint/address", "Endpoint/address"},
	}, {
		name:        "IPv6 slice: IPv6 kept, IPv4 skipped",
		slices:      []*discovery.EndpointSlice{v6Slice(makeSlice("svc", "s1", []sliceEP{ep("fd00::2"), ep("10.0.0.1")}))},
		want:        map[ServicePortName][]Endpoint{httpPort("svc"): {readyEP("fd00::2", 8080)}},
		wantInvalid: []string{"Endpoint/address"},
	}, {
		name: "nil port and unknown protocol skipped",
		slices: []*discovery.EndpointSlice{makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")},
			discovery.EndpointPort{Name: ptr.To("nil")},
			discovery.EndpointPort{Name: ptr.To("big"), Port: ptr.To[int32](70000)},
			discovery.EndpointPort{Name: ptr.To("icmp"), Port: ptr.To[int32](1), Protocol: ptr.To(v1.Protocol("ICMP"))},
			slicePortSpec("http", 8080, v1.ProtocolTCP),
		)},
		want:        map[ServicePortName][]Endpoint{httpPort("svc"): {readyEP("10.0.0.1", 8080)}},
		wantInvalid: []string{"EndpointSlice/port", "EndpointSlice/port", "EndpointSlice/protocol"},
	}, {
		name: "FQDN slices are ignored",
		slices: []*discovery.EndpointSlice{func() *discovery.EndpointSlice {
			s := makeSlice("svc", "s1", []sliceEP{ep("example.com")})
			s.AddressType = discovery.AddressTypeFQDN
			return s
		}()},
		want: map[ServicePortName][]Endpoint{},
	}, {
		name: "slices without the service-name label are ignored",
		slices: []*discovery.EndpointSlice{func() *discovery.EndpointSlice {
			s := makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")})
			s.Labels = nil
			return s
		}()},
		want:        map[ServicePortName][]Endpoint{},
		wantInvalid: []string{"EndpointSlice/service-name"},
	}})
}

func TestEndpointSliceIgnoredMakesNoChange(t *testing.T) {
	fqdn := makeSlice("svc", "s1", []sliceEP{ep("example.com")})
	fqdn.AddressType = discovery.AddressTypeFQDN
	unlabelled := makeSlice("svc", "s2", []sliceEP{ep("10.0.0.1")})
	unlabelled.Labels = nil
	tr := NewEndpointsChangeTracker("node-a", nil)
	for _, s := range []*discovery.EndpointSlice{fqdn, unlabelled, nil} {
		if tr.Update(s, false) {
			t.Errorf("Update(%v) reported a pending change", s)
		}
	}
	if pending, _ := tr.Pending(); pending != 0 {
		t.Errorf("pending = %d, want 0", pending)
	}
}

func TestEndpointSliceTriggerTime(t *testing.T) {
	t1 := time.Date(2025, 1, 2, 3, 4, 5, 600000000, time.UTC)
	t2 := t1.Add(time.Second)
	s1 := makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")})
	s1.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: t1.Format(time.RFC3339Nano)}
	s2 := makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1"), ep("10.0.0.2")})
	s2.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: t2.Format(time.RFC3339Nano)}
	bad := makeSlice("other", "s1", []sliceEP{ep("10.0.0.3")})
	bad.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "yesterday"}

	snap := NewSnapshotter("node-a", nil)
	for _, s := range []*discovery.EndpointSlice{s1, s2, bad} {
		snap.Endpoints.Update(s, false)
	}
	_, diff := snap.Snapshot()
	if d := cmp.Diff([]time.Time{t1, t2}, diff.TriggerTimes); d != "" {
		t.Errorf("trigger times (-want +got):\n%s", d)
	}
	_, diff = snap.Snapshot()
	if len(diff.TriggerTimes) != 0 {
		t.Errorf("second snapshot trigger times = %v, want none", diff.TriggerTimes)
	}
}
