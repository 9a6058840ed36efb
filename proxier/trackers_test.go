package proxier

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// svcOp is one informer event for the service tracker: old -> cur.
type svcOp struct{ old, cur *v1.Service }

// svcFixtures are the Service versions the tracker cases move between.
type svcFixtures struct{ base, port81, renamed, annotated, other *v1.Service }

func newSvcFixtures() svcFixtures {
	return svcFixtures{
		base:      makeService("svc"),
		port81:    makeService("svc", withPorts(tcpPort("http", 81))),
		renamed:   makeService("svc", withPorts(tcpPort("web", 80))),
		annotated: makeService("svc", func(s *v1.Service) { s.Annotations = map[string]string{"a": "b"} }),
		other:     makeService("other", withClusterIPs("10.96.0.20")),
	}
}

// svcTrackerCase applies ops to a tracker that already snapshotted applied.
type svcTrackerCase struct {
	name         string
	applied      []svcOp // snapshotted before the ops under test
	ops          []svcOp
	wantPending  int
	wantTotal    int64
	wantPorts    map[string]uint16 // State.Services: port name -> port
	wantChanged  []string
	wantDeleted  []string
	wantSvcsChgd bool
}

func TestServiceChangeTracker(t *testing.T) {
	fx := newSvcFixtures()
	runSvcTrackerCases(t, []svcTrackerCase{{
		name:         "add",
		ops:          []svcOp{{nil, fx.base}, {nil, fx.other}},
		wantPending:  2,
		wantTotal:    2,
		wantPorts:    map[string]uint16{"ns/svc:http": 80, "ns/other:http": 80},
		wantChanged:  []string{"ns/other:http/TCP", "ns/svc:http/TCP"},
		wantSvcsChgd: true,
	}, {
		name:         "update port number",
		applied:      []svcOp{{nil, fx.base}},
		ops:          []svcOp{{fx.base, fx.port81}},
		wantPending:  1,
		wantTotal:    2,
		wantPorts:    map[string]uint16{"ns/svc:http": 81},
		wantChanged:  []string{"ns/svc:http/TCP"},
		wantSvcsChgd: true,
	}, {
		name:         "rename port: old deleted, new added",
		applied:      []svcOp{{nil, fx.base}},
		ops:          []svcOp{{fx.base, fx.renamed}},
		wantPending:  1,
		wantTotal:    2,
		wantPorts:    map[string]uint16{"ns/svc:web": 80},
		wantChanged:  []string{"ns/svc:http/TCP", "ns/svc:web/TCP"},
		wantDeleted:  []string{"ns/svc:http/TCP"},
		wantSvcsChgd: true,
	}, {
		name:         "delete",
		applied:      []svcOp{{nil, fx.base}, {nil, fx.other}},
		ops:          []svcOp{{fx.base, nil}},
		wantPending:  1,
		wantTotal:    3,
		wantPorts:    map[string]uint16{"ns/other:http": 80},
		wantChanged:  []string{"ns/svc:http/TCP"},
		wantDeleted:  []string{"ns/svc:http/TCP"},
		wantSvcsChgd: true,
	}, {
		name:         "service turning headless is a deletion",
		applied:      []svcOp{{nil, fx.base}},
		ops:          []svcOp{{fx.base, makeService("svc", withClusterIPs(v1.ClusterIPNone))}},
		wantPending:  1,
		wantTotal:    2,
		wantPorts:    map[string]uint16{},
		wantChanged:  []string{"ns/svc:http/TCP"},
		wantDeleted:  []string{"ns/svc:http/TCP"},
		wantSvcsChgd: true,
	}})
}

// Changes that cancel out before a snapshot leave nothing pending.
func TestServiceChangeTrackerNoOps(t *testing.T) {
	fx := newSvcFixtures()
	runSvcTrackerCases(t, []svcTrackerCase{{
		name:      "update that changes nothing the proxier programs is a no-op",
		applied:   []svcOp{{nil, fx.base}},
		ops:       []svcOp{{fx.base, fx.annotated}},
		wantTotal: 2,
		wantPorts: map[string]uint16{"ns/svc:http": 80},
	}, {
		name:      "add then delete before a snapshot is dropped",
		ops:       []svcOp{{nil, fx.base}, {fx.base, nil}},
		wantTotal: 2,
		wantPorts: map[string]uint16{},
	}, {
		name:      "change reverted before a snapshot is dropped",
		applied:   []svcOp{{nil, fx.base}},
		ops:       []svcOp{{fx.base, fx.port81}, {fx.port81, fx.base}},
		wantTotal: 3,
		wantPorts: map[string]uint16{"ns/svc:http": 80},
	}, {
		name:      "delete then re-create identical before a snapshot is dropped",
		applied:   []svcOp{{nil, fx.base}},
		ops:       []svcOp{{fx.base, nil}, {nil, fx.base}},
		wantTotal: 3,
		wantPorts: map[string]uint16{"ns/svc:http": 80},
	}, {
		name:      "headless service makes no change",
		ops:       []svcOp{{nil, makeService("svc", withClusterIPs(v1.ClusterIPNone))}},
		wantTotal: 1,
		wantPorts: map[string]uint16{},
	}})
}

func runSvcTrackerCases(t *testing.T, tests []svcTrackerCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := NewSnapshotter("node-a", nil)
			for _, op := range tc.applied {
				snap.Services.Update(op.old, op.cur)
			}
			snap.Snapshot()
			for _, op := range tc.ops {
				snap.Services.Update(op.old, op.cur)
			}
			pending, total := snap.Services.Pending()
			if pending != tc.wantPending || total != tc.wantTotal {
				t.Errorf("Pending() = %d, %d; want %d, %d", pending, total, tc.wantPending, tc.wantTotal)
			}
			st, diff := snap.Snapshot()
			checkServiceDiff(t, st, diff, tc.wantPorts, tc.wantChanged, tc.wantDeleted, tc.wantSvcsChgd)
			if pending, _ := snap.Services.Pending(); pending != 0 {
				t.Errorf("pending after snapshot = %d, want 0", pending)
			}
		})
	}
}

func checkServiceDiff(t *testing.T, st *State, diff *Diff, ports map[string]uint16, changed, deleted []string, svcsChanged bool) {
	t.Helper()
	gotPorts := map[string]uint16{}
	for n, sp := range st.Services {
		if sp.Name != n {
			t.Errorf("State.Services[%v].Name = %v", n, sp.Name)
		}
		gotPorts[n.String()] = sp.Port
	}
	if d := cmp.Diff(ports, gotPorts); d != "" {
		t.Errorf("State.Services (-want +got):\n%s", d)
	}
	if d := cmp.Diff(changed, nonEmpty(nameSet(diff.Changed))); d != "" {
		t.Errorf("Diff.Changed (-want +got):\n%s", d)
	}
	gotDeleted := map[ServicePortName]struct{}{}
	for n, sp := range diff.Deleted {
		gotDeleted[n] = struct{}{}
		if sp == nil || sp.Name != n {
			t.Errorf("Diff.Deleted[%v] = %v, want the deleted port", n, sp)
		}
	}
	if d := cmp.Diff(deleted, nonEmpty(nameSet(gotDeleted))); d != "" {
		t.Errorf("Diff.Deleted (-want +got):\n%s", d)
	}
	if diff.ServicesChanged != svcsChanged {
		t.Errorf("Diff.ServicesChanged = %v, want %v", diff.ServicesChanged, svcsChanged)
	}
}

// nonEmpty turns an empty slice into nil so "no entries" compares equal.
func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// sliceOp is one informer event for the endpoints tracker.
type sliceOp struct {
	s       *discovery.EndpointSlice
	removed bool
}

// epFixtures are the slice versions the tracker cases move between.
type epFixtures struct {
	one, two, twoUnready, twoTerm, twoDead, second *discovery.EndpointSlice
	udp                                            func(*discovery.EndpointSlice) *discovery.EndpointSlice
}

func newEpFixtures() epFixtures {
	return epFixtures{
		one:        makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")}),
		two:        makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1"), ep("10.0.0.2")}),
		twoUnready: makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1"), ep("10.0.0.2").notReady()}),
		twoTerm:    makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1"), ep("10.0.0.2").servingTerminating()}),
		twoDead:    makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1").notReady(), ep("10.0.0.2").notReady()}),
		second:     makeSlice("svc", "s2", []sliceEP{ep("10.0.0.3")}),
		udp: func(s *discovery.EndpointSlice) *discovery.EndpointSlice {
			c := s.DeepCopy()
			c.Ports = []discovery.EndpointPort{slicePortSpec("dns", 53, v1.ProtocolUDP)}
			return c
		},
	}
}

// epTrackerCase applies ops to a tracker that already snapshotted applied.
type epTrackerCase struct {
	name        string
	applied     []sliceOp
	ops         []sliceOp
	wantPending int
	wantEPs     map[string][]string
	wantChanged []string
	wantStale   []string
	wantNewly   []string
}

func TestEndpointsChangeTrackerStale(t *testing.T) {
	fx := newEpFixtures()
	runEpTrackerCases(t, []epTrackerCase{{
		name:        "endpoint removed is stale",
		applied:     []sliceOp{{fx.two, false}},
		ops:         []sliceOp{{fx.one, false}},
		wantPending: 1,
		wantEPs:     map[string][]string{"ns/svc:http": {"10.0.0.1:8080"}},
		wantChanged: []string{"ns/svc:http/TCP"},
		wantStale:   []string{"ns/svc:http=10.0.0.2:8080"},
	}, {
		name:        "endpoint no longer serving is stale",
		applied:     []sliceOp{{fx.two, false}},
		ops:         []sliceOp{{fx.twoUnready, false}},
		wantPending: 1,
		wantEPs:     map[string][]string{"ns/svc:http": {"10.0.0.1:8080", "10.0.0.2:8080"}},
		wantChanged: []string{"ns/svc:http/TCP"},
		wantStale:   []string{"ns/svc:http=10.0.0.2:8080"},
	}, {
		name:        "endpoint becoming serving-terminating is not stale (still usable)",
		applied:     []sliceOp{{fx.two, false}},
		ops:         []sliceOp{{fx.twoTerm, false}},
		wantPending: 1,
		wantEPs:     map[string][]string{"ns/svc:http": {"10.0.0.1:8080", "10.0.0.2:8080"}},
		wantChanged: []string{"ns/svc:http/TCP"},
	}, {
		name:        "removing a not-ready endpoint leaves nothing stale",
		applied:     []sliceOp{{fx.twoUnready, false}},
		ops:         []sliceOp{{fx.one, false}},
		wantPending: 1,
		wantEPs:     map[string][]string{"ns/svc:http": {"10.0.0.1:8080"}},
		wantChanged: []string{"ns/svc:http/TCP"},
	}, {
		name:        "slice deleted: all its endpoints stale, other slice kept",
		applied:     []sliceOp{{fx.two, false}, {fx.second, false}},
		ops:         []sliceOp{{fx.two, true}},
		wantPending: 1,
		wantEPs:     map[string][]string{"ns/svc:http": {"10.0.0.3:8080"}},
		wantChanged: []string{"ns/svc:http/TCP"},
		wantStale:   []string{"ns/svc:http=10.0.0.1:8080", "ns/svc:http=10.0.0.2:8080"},
	}, {
		name:        "last slice deleted: service port gone from Endpoints",
		applied:     []sliceOp{{fx.one, false}},
		ops:         []sliceOp{{fx.one, true}},
		wantPending: 1,
		wantEPs:     map[string][]string{},
		wantChanged: []string{"ns/svc:http/TCP"},
		wantStale:   []string{"ns/svc:http=10.0.0.1:8080"},
	}})
}

func TestEndpointsChangeTrackerNewlyServing(t *testing.T) {
	fx := newEpFixtures()
	runEpTrackerCases(t, []epTrackerCase{{
		name:        "add TCP: changed, not newly serving (UDP/SCTP only)",
		ops:         []sliceOp{{fx.two, false}},
		wantPending: 1,
		wantEPs:     map[string][]string{"ns/svc:http": {"10.0.0.1:8080", "10.0.0.2:8080"}},
		wantChanged: []string{"ns/svc:http/TCP"},
	}, {
		name:        "add UDP: newly serving",
		ops:         []sliceOp{{fx.udp(fx.two), false}},
		wantPending: 1,
		wantEPs:     map[string][]string{"ns/svc:dns": {"10.0.0.1:53", "10.0.0.2:53"}},
		wantChanged: []string{"ns/svc:dns/UDP"},
		wantNewly:   []string{"ns/svc:dns/UDP"},
	}, {
		name:        "UDP going from no usable endpoint to fx.one is newly serving",
		applied:     []sliceOp{{fx.udp(fx.twoDead), false}},
		ops:         []sliceOp{{fx.udp(fx.twoUnready), false}},
		wantPending: 1,
		wantEPs:     map[string][]string{"ns/svc:dns": {"10.0.0.1:53", "10.0.0.2:53"}},
		wantChanged: []string{"ns/svc:dns/UDP"},
		wantNewly:   []string{"ns/svc:dns/UDP"},
	}, {
		name:        "UDP with endpoints before is not newly serving",
		applied:     []sliceOp{{fx.udp(fx.one), false}},
		ops:         []sliceOp{{fx.udp(fx.two), false}},
		wantPending: 1,
		wantEPs:     map[string][]string{"ns/svc:dns": {"10.0.0.1:53", "10.0.0.2:53"}},
		wantChanged: []string{"ns/svc:dns/UDP"},
	}})
}

// Changes that cancel out before a snapshot leave nothing pending.
func TestEndpointsChangeTrackerNoOps(t *testing.T) {
	fx := newEpFixtures()
	runEpTrackerCases(t, []epTrackerCase{{
		name:    "change reverted before a snapshot is dropped",
		applied: []sliceOp{{fx.one, false}},
		ops:     []sliceOp{{fx.two, false}, {fx.one, false}},
		wantEPs: map[string][]string{"ns/svc:http": {"10.0.0.1:8080"}},
	}, {
		name:    "add then delete before a snapshot is dropped",
		ops:     []sliceOp{{fx.two, false}, {fx.two, true}},
		wantEPs: map[string][]string{},
	}, {
		name:    "identical re-add is a no-op",
		applied: []sliceOp{{fx.one, false}},
		ops:     []sliceOp{{fx.one.DeepCopy(), false}},
		wantEPs: map[string][]string{"ns/svc:http": {"10.0.0.1:8080"}},
	}})
}

func runEpTrackerCases(t *testing.T, tests []epTrackerCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := NewSnapshotter("node-a", nil)
			for _, op := range tc.applied {
				snap.Endpoints.Update(op.s, op.removed)
			}
			snap.Snapshot()
			for _, op := range tc.ops {
				snap.Endpoints.Update(op.s, op.removed)
			}
			if pending, total := snap.Endpoints.Pending(); pending != tc.wantPending || total != int64(len(tc.applied)+len(tc.ops)) {
				t.Errorf("Pending() = %d, %d; want %d, %d", pending, total, tc.wantPending, len(tc.applied)+len(tc.ops))
			}
			st, diff := snap.Snapshot()
			checkEndpointsDiff(t, st, diff, tc.wantEPs, tc.wantChanged, tc.wantStale, tc.wantNewly)
		})
	}
}

func checkEndpointsDiff(t *testing.T, st *State, diff *Diff, eps map[string][]string, changed, stale, newly []string) {
	t.Helper()
	got := map[string][]string{}
	for n, e := range st.Endpoints {
		got[n.String()] = endpointKeys(e)
	}
	if d := cmp.Diff(eps, got); d != "" {
		t.Errorf("State.Endpoints (-want +got):\n%s", d)
	}
	if d := cmp.Diff(changed, nonEmpty(nameSet(diff.Changed))); d != "" {
		t.Errorf("Diff.Changed (-want +got):\n%s", d)
	}
	if d := cmp.Diff(stale, nonEmpty(staleKeys(diff.StaleEndpoints))); d != "" {
		t.Errorf("Diff.StaleEndpoints (-want +got):\n%s", d)
	}
	if d := cmp.Diff(newly, nonEmpty(nameSet(diff.NewlyServing))); d != "" {
		t.Errorf("Diff.NewlyServing (-want +got):\n%s", d)
	}
	if diff.ServicesChanged || len(diff.Deleted) > 0 || diff.Full {
		t.Errorf("endpoint-only change: ServicesChanged=%v Deleted=%v Full=%v, want false/none/false",
			diff.ServicesChanged, diff.Deleted, diff.Full)
	}
}
