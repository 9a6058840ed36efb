package proxier

import (
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// reportState is a State with services exercising the local-endpoint
// accounting: health-check node ports and no-local-endpoint counts.
func reportState() *State {
	lbLocal := func(name, port string, hc uint16) *ServicePort {
		return &ServicePort{Name: spn(name, port, v1.ProtocolTCP), Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30000 + hc%1000,
			ExternalPolicyLocal: true, HealthCheckNodePort: hc}
	}
	st := &State{Services: map[ServicePortName]*ServicePort{}, Endpoints: map[ServicePortName][]Endpoint{}, Node: NodeInfo{Name: "node-a"}}
	add := func(sp *ServicePort, eps ...Endpoint) {
		st.Services[sp.Name] = sp
		st.Endpoints[sp.Name] = eps
	}
	// Two ports served by the same local pod count once.
	add(lbLocal("lb", "http", 32000), local(rdy("10.0.0.1")), rdy("10.0.0.2"))
	add(lbLocal("lb", "https", 32000), local(rdy("10.0.0.1")), rdy("10.0.0.2"))
	// Only a terminating pod here: traffic still goes to it, but the
	// health check must report 0 so load balancers drain the node.
	add(lbLocal("draining", "http", 32001), local(term("10.0.0.3")), rdy("10.0.0.4"))
	add(lbLocal("nolocal", "http", 32002), rdy("10.0.0.5"))
	add(&ServicePort{Name: spn("internal", "http", v1.ProtocolTCP), Port: 80, InternalPolicyLocal: true}, rdy("10.0.0.6"))
	add(&ServicePort{Name: spn("empty", "http", v1.ProtocolTCP), Port: 80, InternalPolicyLocal: true})
	add(&ServicePort{Name: spn("cluster", "http", v1.ProtocolTCP), Port: 80}, rdy("10.0.0.7"))
	return st
}

func TestCountLocal(t *testing.T) {
	st := reportState()
	var locals localPorts
	locals.update(st, &Diff{Full: true})
	c := countLocal(st, locals, v1.IPv4Protocol)
	nn := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: testNS, Name: n} }
	if d := cmp.Diff(map[types.NamespacedName]uint16{nn("lb"): 32000, nn("draining"): 32001, nn("nolocal"): 32002}, c.hcPorts); d != "" {
		t.Errorf("health-check ports (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[types.NamespacedName]int{nn("lb"): 1, nn("draining"): 0, nn("nolocal"): 0}, c.local); d != "" {
		t.Errorf("local ready endpoints (-want +got):\n%s", d)
	}
	if c.noLocalInternal != 1 || c.noLocalExternal != 1 {
		t.Errorf("no-local counts internal %d external %d, want 1 and 1", c.noLocalInternal, c.noLocalExternal)
	}
}

// recordingServiceHealth is a ServiceHealth that keeps what it was told.
type recordingServiceHealth struct {
	ports map[types.NamespacedName]uint16
	local map[types.NamespacedName]int
}

func (r *recordingServiceHealth) SyncServices(p map[types.NamespacedName]uint16) error {
	r.ports = p
	return nil
}

func (r *recordingServiceHealth) SyncEndpoints(l map[types.NamespacedName]int) {
	r.local = l
}

// TestReport: a dual-stack sync is recorded under both families, as
// kube-proxy's two per-family proxiers would record theirs; network
// programming latency and the no-local counts go to the primary family.
func TestReport(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	svcHealth := &recordingServiceHealth{}
	health := &recordingHealth{}
	cfg := Config{NodeName: "node-a", Family: v1.IPv4Protocol, Families: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}}
	p := New(nil, newRecordingBackend(), cfg, m, health, svcHealth)
	diff := newDiff()
	diff.TriggerTimes = []time.Time{time.Now()}
	p.report(reportState(), diff, true, 0)
	if len(svcHealth.ports) != 3 || svcHealth.local[types.NamespacedName{Namespace: testNS, Name: "lb"}] != 1 {
		t.Errorf("service health got ports %v local %v", svcHealth.ports, svcHealth.local)
	}
	if _, updated, _, _ := health.counts(); updated != 1 {
		t.Errorf("health Updated %d times, want 1", updated)
	}
	tests := []struct {
		name string
		m    any
		want float64
	}{
		{"no-local internal IPv4", m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(metrics.TrafficPolicyInternal, "IPv4"), 1},
		{"no-local external IPv4", m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(metrics.TrafficPolicyExternal, "IPv4"), 1},
		{"syncs IPv4", m.SyncProxyRulesLatency.WithLabelValues("IPv4"), 1},
		{"syncs IPv6", m.SyncProxyRulesLatency.WithLabelValues("IPv6"), 1},
		{"full syncs IPv6", m.SyncFullProxyRulesLatency.WithLabelValues("IPv6"), 1},
		{"partial syncs IPv4", m.SyncPartialProxyRulesLatency.WithLabelValues("IPv4"), 0},
		{"programming IPv4", m.NetworkProgrammingLatency.WithLabelValues("IPv4"), 1},
		{"programming IPv6", m.NetworkProgrammingLatency.WithLabelValues("IPv6"), 0},
	}
	for _, tc := range tests {
		if got := metricValue(t, tc.m); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := metricValue(t, m.SyncProxyRulesLastTimestamp.WithLabelValues("IPv6")); got == 0 {
		t.Error("last sync timestamp of IPv6 not set")
	}
}

// The Local-policy index kept from the changed ports of each Diff equals
// one rebuilt from the whole State: a port turned Local, one turned
// Cluster, one deleted.
func TestLocalPortsFollowDiffs(t *testing.T) {
	st := reportState()
	var locals localPorts
	locals.update(st, &Diff{Full: true})
	next := &State{Services: maps.Clone(st.Services), Endpoints: st.Endpoints, Node: st.Node}
	toLocal, toCluster, gone := spn("cluster", "http", v1.ProtocolTCP), spn("internal", "http", v1.ProtocolTCP), spn("lb", "http", v1.ProtocolTCP)
	sp := *next.Services[toLocal]
	sp.InternalPolicyLocal = true
	next.Services[toLocal] = &sp
	sp2 := *next.Services[toCluster]
	sp2.InternalPolicyLocal = false
	next.Services[toCluster] = &sp2
	delete(next.Services, gone)
	locals.update(next, &Diff{Changed: map[ServicePortName]struct{}{toLocal: {}, toCluster: {}, gone: {}}})
	var rebuilt localPorts
	rebuilt.update(next, &Diff{Full: true})
	if d := cmp.Diff(rebuilt, locals); d != "" {
		t.Errorf("index after the diff (-rebuilt +kept):\n%s", d)
	}
	if _, ok := locals[toLocal]; !ok || len(locals) != len(rebuilt) {
		t.Errorf("index %v, want the port turned Local in it", locals)
	}
}
