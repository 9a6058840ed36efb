package proxier

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// EndpointSelection is the outcome of SelectEndpoints for one service port:
// which endpoints each kind of traffic may reach. Every backend builds its
// rules, virtual servers or balancer from it, so all modes share one set of
// semantics.
type EndpointSelection struct {
	// Cluster holds the endpoints for traffic under the Cluster policy:
	// ready endpoints (narrowed by topology hints when they apply), or, if
	// none is ready anywhere, the serving-terminating ones (KEP-1669).
	Cluster []Endpoint
	// Local holds this node's endpoints for traffic under the Local policy:
	// local ready endpoints, or local serving-terminating ones if none is
	// ready.
	Local []Endpoint
	// AllReachable is the union of Cluster and Local: every endpoint some
	// traffic may be sent to.
	AllReachable []Endpoint
	// HasAny reports whether the service port has any usable endpoint in
	// the cluster, local or not.
	HasAny bool
}

// Internal returns the endpoints for traffic addressed to a cluster IP.
func (s *EndpointSelection) Internal(sp *ServicePort) []Endpoint {
	if sp.InternalPolicyLocal {
		return s.Local
	}
	return s.Cluster
}

// External returns the endpoints for traffic addressed to a NodePort,
// ExternalIP or load-balancer IP from outside the node.
func (s *EndpointSelection) External(sp *ServicePort) []Endpoint {
	if sp.ExternalPolicyLocal {
		return s.Local
	}
	return s.Cluster
}

// SelectEndpoints is the one endpoint-selection function every backend
// uses. It is pure: the result depends only on its arguments. Only
// endpoints of the given IP family are considered.
//
// It follows Kubernetes semantics: ready endpoints first, falling back to
// serving-terminating ones when nothing is ready (KEP-1669); topology hints
// (KEP-2433, trafficDistribution KEP-4444) narrow Cluster endpoints when
// every ready endpoint carries hints and one matches this node or its zone;
// internal and external traffic policies pick Cluster or Local.
func SelectEndpoints(sp *ServicePort, all []Endpoint, node NodeInfo, family v1.IPFamily) EndpointSelection {
	eps := ofFamily(all, family)
	var sel EndpointSelection
	if sp.UsesClusterEndpoints() {
		sel.Cluster = selectCluster(eps, node)
		sel.HasAny = len(sel.Cluster) > 0
	}
	if !sp.UsesLocalEndpoints() {
		sel.AllReachable = sel.Cluster
		return sel
	}
	sel.Local = selectLocal(eps)
	sel.HasAny = sel.HasAny || slices.ContainsFunc(eps, func(e Endpoint) bool { return usable(&e) })
	sel.AllReachable = unionEndpoints(sel.Cluster, sel.Local)
	return sel
}

// ofFamily returns the endpoints of a family; all itself when every one is
// (the usual case), as it is only read.
func ofFamily(all []Endpoint, family v1.IPFamily) []Endpoint {
	other := func(e Endpoint) bool { return FamilyOf(e.IP) != family }
	if !slices.ContainsFunc(all, other) {
		return all
	}
	return filterEndpoints(all, func(e *Endpoint) bool { return FamilyOf(e.IP) == family })
}

// usable reports whether traffic may be sent to the endpoint at all.
func usable(e *Endpoint) bool { return e.Ready || (e.Serving && e.Terminating) }

func selectCluster(eps []Endpoint, node NodeInfo) []Endpoint {
	mode := topologyMode(eps, node)
	out := filterEndpoints(eps, func(e *Endpoint) bool {
		return e.Ready && availableForTopology(e, mode, node)
	})
	if len(out) > 0 {
		return out
	}
	// No ready endpoint anywhere (topology was already ignored if it would
	// have left none): fall back to serving-terminating endpoints.
	return filterEndpoints(eps, func(e *Endpoint) bool { return e.Serving && e.Terminating })
}

func selectLocal(eps []Endpoint) []Endpoint {
	out := filterEndpoints(eps, func(e *Endpoint) bool { return e.IsLocal && e.Ready })
	if len(out) > 0 {
		return out
	}
	return filterEndpoints(eps, func(e *Endpoint) bool { return e.IsLocal && e.Serving && e.Terminating })
}

type topology int

const (
	topologyNone topology = iota
	topologyNode
	topologyZone
)

// topologyMode decides whether hints apply: only when every ready endpoint
// carries hints of a kind, and at least one is for this node (or zone).
// Otherwise hints are ignored so traffic is never black-holed.
func topologyMode(eps []Endpoint, node NodeInfo) topology {
	allNode, allZone := true, true
	forNode, forZone := false, false
	for i := range eps {
		e := &eps[i]
		if !e.Ready {
			continue
		}
		allNode = allNode && len(e.NodeHints()) > 0
		allZone = allZone && len(e.ZoneHints()) > 0
		forNode = forNode || slices.Contains(e.NodeHints(), node.Name)
		forZone = forZone || (node.Zone != "" && slices.Contains(e.ZoneHints(), node.Zone))
	}
	switch {
	case allNode && forNode:
		return topologyNode
	case allZone && forZone:
		return topologyZone
	}
	return topologyNone
}

func availableForTopology(e *Endpoint, mode topology, node NodeInfo) bool {
	switch mode {
	case topologyNode:
		return slices.Contains(e.NodeHints(), node.Name)
	case topologyZone:
		return slices.Contains(e.ZoneHints(), node.Zone)
	}
	return true
}

// filterEndpoints returns a new slice of the endpoints keep accepts, nil if
// none. It counts them first: Endpoint is large and the render filters
// every service port's endpoints, so growing by appends would copy them
// several times over.
func filterEndpoints(eps []Endpoint, keep func(*Endpoint) bool) []Endpoint {
	n := 0
	for i := range eps {
		if keep(&eps[i]) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Endpoint, 0, n)
	for i := range eps {
		if keep(&eps[i]) {
			out = append(out, eps[i])
		}
	}
	return out
}

// unionEndpoints merges two endpoint lists (each sorted, as State keeps
// them) without duplicates, keeping the sorted order.
func unionEndpoints(a, b []Endpoint) []Endpoint {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, compareEndpoints)
	return slices.CompactFunc(out, func(x, y Endpoint) bool { return x.Key() == y.Key() })
}

func compareEndpoints(a, b Endpoint) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}
