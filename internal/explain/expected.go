package explain

import (
	"cmp"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Objects are what the API says about one Service, as the daemon sees it.
type Objects struct {
	Service *v1.Service
	Slices  []*discovery.EndpointSlice
	// Node is this node's Node object; nil if it could not be read
	// (topology hints and the node's addresses are then unknown).
	Node *v1.Node
	// NodeName is the name the daemon runs under (--hostname-override).
	NodeName string
	// Families are the IP families the daemon programs, primary first.
	Families []v1.IPFamily
	// NodePortAddresses are where NodePorts answer (--nodeport-addresses,
	// keywords resolved); none of a family: every address of it.
	NodePortAddresses []netip.Prefix
}

// ExpectedPort is one service port as the daemon programs it: its
// endpoint selection per IP family.
type ExpectedPort struct {
	Port       *proxier.ServicePort
	Endpoints  []proxier.Endpoint
	Selections map[v1.IPFamily]proxier.EndpointSelection
}

// Expected converts the objects with the daemon's own pipeline (the
// proxier's change trackers and snapshot, then SelectEndpoints) and
// returns the service ports sorted by name, and the node as the daemon
// knows it.
func Expected(o Objects) ([]ExpectedPort, proxier.NodeInfo) {
	st := State(o)
	var out []ExpectedPort
	for name, sp := range st.Services {
		ep := ExpectedPort{Port: sp, Endpoints: st.Endpoints[name], Selections: map[v1.IPFamily]proxier.EndpointSelection{}}
		for _, fam := range o.Families {
			ep.Selections[fam] = proxier.SelectEndpoints(sp, ep.Endpoints, st.Node, fam)
		}
		out = append(out, ep)
	}
	slices.SortFunc(out, func(a, b ExpectedPort) int {
		return cmp.Or(cmp.Compare(a.Port.Name.Port, b.Port.Name.Port), cmp.Compare(a.Port.Protocol, b.Port.Protocol))
	})
	return out, st.Node
}

// State is the proxier State the daemon would build from the objects
// alone: the Service's ports and endpoints, and the node.
func State(o Objects) *proxier.State {
	snap := proxier.NewSnapshotter(o.NodeName, nil)
	snap.SetFamilies(o.Families, func(string, v1.IPFamily) {})
	snap.UpdateNode(o.Node)
	snap.Services.Update(nil, o.Service)
	for _, s := range o.Slices {
		snap.Endpoints.Update(s, false)
	}
	st, _ := snap.Snapshot()
	return st
}

// keys are the endpoints' addresses and ports, sorted.
func keys(eps []proxier.Endpoint) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.Key())
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}
