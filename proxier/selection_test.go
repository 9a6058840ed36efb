package proxier

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// Endpoint builders for selection tests (port 80 everywhere).
func rdy(ip string) Endpoint { return readyEP(ip, 80) }

func term(ip string) Endpoint { // serving and terminating
	return Endpoint{IP: netip.MustParseAddr(ip), Port: 80, Serving: true, Terminating: true}
}

func dead(ip string) Endpoint { // terminating and no longer serving
	return Endpoint{IP: netip.MustParseAddr(ip), Port: 80, Terminating: true}
}

func unready(ip string) Endpoint { return Endpoint{IP: netip.MustParseAddr(ip), Port: 80} }

func local(e Endpoint) Endpoint { e.IsLocal, e.NodeName = true, "node-a"; return e }

func zoneHints(e Endpoint, zones ...string) Endpoint {
	t := EndpointTopology{}
	if e.Topology != nil {
		t = *e.Topology
	}
	t.ZoneHints = zones
	e.Topology = &t
	return e
}

func nodeHints(e Endpoint, nodes ...string) Endpoint {
	t := EndpointTopology{}
	if e.Topology != nil {
		t = *e.Topology
	}
	t.NodeHints = nodes
	e.Topology = &t
	return e
}

// selectionCase is one SelectEndpoints case; node defaults to node-a in
// zone z1 and family to IPv4.
type selectionCase struct {
	name        string
	sp          *ServicePort
	eps         []Endpoint
	node        *NodeInfo
	family      v1.IPFamily
	cluster     []string
	local       []string
	all         []string
	hasAny      bool
	internalSel string // "local" when Internal() returns Local, else Cluster
}

// Service ports for the selection cases.
func spClusterIP() *ServicePort { return &ServicePort{Port: 80} }

func spNodePortLocal() *ServicePort {
	return &ServicePort{Port: 80, NodePort: 30080, ExternalPolicyLocal: true}
}

func spInternalLocal() *ServicePort { return &ServicePort{Port: 80, InternalPolicyLocal: true} }

func spBothLocal() *ServicePort {
	return &ServicePort{Port: 80, NodePort: 30080, ExternalPolicyLocal: true, InternalPolicyLocal: true}
}

func TestSelectEndpointsReadiness(t *testing.T) {
	runSelectionCases(t, []selectionCase{{
		name:    "ready only",
		sp:      spClusterIP(),
		eps:     []Endpoint{rdy("10.0.0.1"), unready("10.0.0.2"), term("10.0.0.3"), rdy("10.0.0.4")},
		cluster: []string{"10.0.0.1:80", "10.0.0.4:80"},
		all:     []string{"10.0.0.1:80", "10.0.0.4:80"},
		hasAny:  true,
	}, {
		name:    "no ready endpoint: fall back to serving-terminating ones",
		sp:      spClusterIP(),
		eps:     []Endpoint{unready("10.0.0.1"), term("10.0.0.2"), dead("10.0.0.3"), term("10.0.0.4")},
		cluster: []string{"10.0.0.2:80", "10.0.0.4:80"},
		all:     []string{"10.0.0.2:80", "10.0.0.4:80"},
		hasAny:  true,
	}, {
		name: "nothing usable",
		sp:   spClusterIP(),
		eps:  []Endpoint{unready("10.0.0.1"), dead("10.0.0.2")},
	}})
}

func TestSelectEndpointsTrafficPolicy(t *testing.T) {
	runSelectionCases(t, []selectionCase{{
		name:    "eTP Local: local set is this node's ready endpoints",
		sp:      spNodePortLocal(),
		eps:     []Endpoint{rdy("10.0.0.2"), local(rdy("10.0.0.9")), local(term("10.0.0.5"))},
		cluster: []string{"10.0.0.2:80", "10.0.0.9:80"},
		local:   []string{"10.0.0.9:80"},
		all:     []string{"10.0.0.2:80", "10.0.0.9:80"},
		hasAny:  true,
	}, {
		name:    "eTP Local: only serving-terminating locally, union sorted",
		sp:      spNodePortLocal(),
		eps:     []Endpoint{rdy("10.0.0.5"), local(term("10.0.0.1")), local(dead("10.0.0.3"))},
		cluster: []string{"10.0.0.5:80"},
		local:   []string{"10.0.0.1:80"},
		all:     []string{"10.0.0.1:80", "10.0.0.5:80"},
		hasAny:  true,
	}, {
		name:    "eTP Local: no local endpoint, some remote",
		sp:      spNodePortLocal(),
		eps:     []Endpoint{rdy("10.0.0.5")},
		cluster: []string{"10.0.0.5:80"},
		all:     []string{"10.0.0.5:80"},
		hasAny:  true,
	}, {
		name:        "iTP Local: no cluster set, local ready",
		sp:          spInternalLocal(),
		eps:         []Endpoint{rdy("10.0.0.2"), local(rdy("10.0.0.3"))},
		local:       []string{"10.0.0.3:80"},
		all:         []string{"10.0.0.3:80"},
		hasAny:      true,
		internalSel: "local",
	}, {
		name:        "iTP Local: nothing local but endpoints elsewhere",
		sp:          spInternalLocal(),
		eps:         []Endpoint{rdy("10.0.0.2"), term("10.0.0.4")},
		hasAny:      true,
		internalSel: "local",
	}, {
		name:        "iTP Local: only a remote serving-terminating endpoint still counts as HasAny",
		sp:          spInternalLocal(),
		eps:         []Endpoint{term("10.0.0.4"), unready("10.0.0.5")},
		hasAny:      true,
		internalSel: "local",
	}, {
		name:        "iTP Local with external IP: cluster set kept for short-circuiting",
		sp:          &ServicePort{Port: 80, ExternalIPs: addrs("192.0.2.1"), InternalPolicyLocal: true},
		eps:         []Endpoint{rdy("10.0.0.2"), local(rdy("10.0.0.3"))},
		cluster:     []string{"10.0.0.2:80", "10.0.0.3:80"},
		local:       []string{"10.0.0.3:80"},
		all:         []string{"10.0.0.2:80", "10.0.0.3:80"},
		hasAny:      true,
		internalSel: "local",
	}, {
		name:        "iTP Local: nothing usable anywhere",
		sp:          spInternalLocal(),
		eps:         []Endpoint{unready("10.0.0.5"), local(dead("10.0.0.6"))},
		internalSel: "local",
	}, {
		// Cluster endpoints still exist for short-circuited in-cluster
		// traffic to the node port / external IPs.
		name:        "iTP and eTP Local: local serving-terminating fallback",
		sp:          spBothLocal(),
		eps:         []Endpoint{rdy("10.0.0.2"), local(term("10.0.0.3"))},
		cluster:     []string{"10.0.0.2:80"},
		local:       []string{"10.0.0.3:80"},
		all:         []string{"10.0.0.2:80", "10.0.0.3:80"},
		hasAny:      true,
		internalSel: "local",
	}})
}

func TestSelectEndpointsTopology(t *testing.T) {
	runSelectionCases(t, []selectionCase{{
		name: "zone hints apply when every ready endpoint has one and one matches",
		sp:   spClusterIP(),
		eps: []Endpoint{zoneHints(rdy("10.0.0.1"), "z1"), zoneHints(rdy("10.0.0.2"), "z2"),
			zoneHints(rdy("10.0.0.3"), "z2", "z1"), unready("10.0.0.4")},
		cluster: []string{"10.0.0.1:80", "10.0.0.3:80"},
		all:     []string{"10.0.0.1:80", "10.0.0.3:80"},
		hasAny:  true,
	}, {
		name:    "zone hints ignored when one ready endpoint has none",
		sp:      spClusterIP(),
		eps:     []Endpoint{zoneHints(rdy("10.0.0.1"), "z1"), zoneHints(rdy("10.0.0.2"), "z2"), rdy("10.0.0.3")},
		cluster: []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"},
		all:     []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"},
		hasAny:  true,
	}, {
		name:    "zone hints ignored when none is for this zone (no black hole)",
		sp:      spClusterIP(),
		eps:     []Endpoint{zoneHints(rdy("10.0.0.1"), "z2"), zoneHints(rdy("10.0.0.2"), "z3")},
		cluster: []string{"10.0.0.1:80", "10.0.0.2:80"},
		all:     []string{"10.0.0.1:80", "10.0.0.2:80"},
		hasAny:  true,
	}, {
		name:    "zone hints ignored when the node has no zone",
		sp:      spClusterIP(),
		node:    &NodeInfo{Name: "node-a"},
		eps:     []Endpoint{zoneHints(rdy("10.0.0.1"), "z1"), zoneHints(rdy("10.0.0.2"), "z2")},
		cluster: []string{"10.0.0.1:80", "10.0.0.2:80"},
		all:     []string{"10.0.0.1:80", "10.0.0.2:80"},
		hasAny:  true,
	}, {
		name: "node hints win over zone hints",
		sp:   spClusterIP(),
		eps: []Endpoint{nodeHints(zoneHints(rdy("10.0.0.1"), "z1"), "node-b"),
			nodeHints(zoneHints(rdy("10.0.0.2"), "z1"), "node-a")},
		cluster: []string{"10.0.0.2:80"},
		all:     []string{"10.0.0.2:80"},
		hasAny:  true,
	}, {
		name: "node hints for other nodes only: zone hints apply",
		sp:   spClusterIP(),
		eps: []Endpoint{nodeHints(zoneHints(rdy("10.0.0.1"), "z1"), "node-b"),
			nodeHints(zoneHints(rdy("10.0.0.2"), "z2"), "node-c")},
		cluster: []string{"10.0.0.1:80"},
		all:     []string{"10.0.0.1:80"},
		hasAny:  true,
	}, {
		name:    "hints do not narrow the serving-terminating fallback",
		sp:      spClusterIP(),
		eps:     []Endpoint{zoneHints(term("10.0.0.1"), "z2"), zoneHints(term("10.0.0.2"), "z1")},
		cluster: []string{"10.0.0.1:80", "10.0.0.2:80"},
		all:     []string{"10.0.0.1:80", "10.0.0.2:80"},
		hasAny:  true,
	}, {
		name:    "hints do not narrow the local set",
		sp:      spNodePortLocal(),
		eps:     []Endpoint{zoneHints(rdy("10.0.0.1"), "z1"), local(zoneHints(rdy("10.0.0.2"), "z2"))},
		cluster: []string{"10.0.0.1:80"},
		local:   []string{"10.0.0.2:80"},
		all:     []string{"10.0.0.1:80", "10.0.0.2:80"},
		hasAny:  true,
	}})
}

func TestSelectEndpointsFamily(t *testing.T) {
	runSelectionCases(t, []selectionCase{{
		name:    "IPv4 selection ignores IPv6 endpoints",
		sp:      spNodePortLocal(),
		eps:     []Endpoint{rdy("10.0.0.1"), rdy("fd00::1"), local(rdy("fd00::2"))},
		cluster: []string{"10.0.0.1:80"},
		all:     []string{"10.0.0.1:80"},
		hasAny:  true,
	}, {
		name:    "IPv6 selection ignores IPv4 endpoints",
		sp:      spNodePortLocal(),
		family:  v1.IPv6Protocol,
		eps:     []Endpoint{rdy("10.0.0.1"), rdy("fd00::1"), local(rdy("fd00::2"))},
		cluster: []string{"[fd00::1]:80", "[fd00::2]:80"},
		local:   []string{"[fd00::2]:80"},
		all:     []string{"[fd00::1]:80", "[fd00::2]:80"},
		hasAny:  true,
	}, {
		name:   "only IPv6 endpoints: nothing for IPv4",
		sp:     spClusterIP(),
		eps:    []Endpoint{rdy("fd00::1")},
		hasAny: false,
	}})
}

func runSelectionCases(t *testing.T, tests []selectionCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, family := NodeInfo{Name: "node-a", Zone: "z1"}, v1.IPv4Protocol
			if tc.node != nil {
				n = *tc.node
			}
			if tc.family != "" {
				family = tc.family
			}
			sel := SelectEndpoints(tc.sp, tc.eps, n, family)
			checkSelection(t, tc, &sel)
		})
	}
}

func checkSelection(t *testing.T, tc selectionCase, sel *EndpointSelection) {
	t.Helper()
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"Cluster", endpointKeys(sel.Cluster), tc.cluster},
		{"Local", endpointKeys(sel.Local), tc.local},
		{"AllReachable", endpointKeys(sel.AllReachable), tc.all},
	} {
		if d := cmp.Diff(c.want, nonEmpty(c.got)); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.what, d)
		}
	}
	if sel.HasAny != tc.hasAny {
		t.Errorf("HasAny = %v, want %v", sel.HasAny, tc.hasAny)
	}
	wantInternal, wantExternal := sel.Cluster, sel.Cluster
	if tc.internalSel == "local" {
		wantInternal = sel.Local
	}
	if tc.sp.ExternalPolicyLocal {
		wantExternal = sel.Local
	}
	if d := cmp.Diff(endpointKeys(wantInternal), endpointKeys(sel.Internal(tc.sp))); d != "" {
		t.Errorf("Internal (-want +got):\n%s", d)
	}
	if d := cmp.Diff(endpointKeys(wantExternal), endpointKeys(sel.External(tc.sp))); d != "" {
		t.Errorf("External (-want +got):\n%s", d)
	}
}

// SelectEndpoints must not modify its input: State is shared.
func TestSelectEndpointsDoesNotModifyInput(t *testing.T) {
	eps := []Endpoint{rdy("10.0.0.5"), local(term("10.0.0.1")), local(rdy("10.0.0.3"))}
	orig := append([]Endpoint(nil), eps...)
	sp := &ServicePort{Port: 80, NodePort: 30080, ExternalPolicyLocal: true}
	sel := SelectEndpoints(sp, eps, NodeInfo{Name: "node-a"}, v1.IPv4Protocol)
	sel.AllReachable = append(sel.AllReachable[:0], rdy("10.9.9.9"))
	if d := cmp.Diff(orig, eps, cmpAddrs); d != "" {
		t.Errorf("input modified (-orig +now):\n%s", d)
	}
}
