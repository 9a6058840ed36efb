package proxier

import (
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// sliceEndpoints is the validated content of one EndpointSlice.
type sliceEndpoints struct {
	ports     []slicePort
	endpoints []Endpoint // see sliceInfo.endpoints
}

// serviceOfSlice returns the Service a slice belongs to, from the
// kubernetes.io/service-name label.
func serviceOfSlice(s *discovery.EndpointSlice) (types.NamespacedName, bool) {
	name := s.Labels[discovery.LabelServiceName]
	if name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: s.Namespace, Name: name}, true
}

// sliceFamily is the IP family of a slice's address type; false for
// FQDN slices.
func sliceFamily(s *discovery.EndpointSlice) (v1.IPFamily, bool) {
	switch s.AddressType {
	case discovery.AddressTypeIPv4:
		return v1.IPv4Protocol, true
	case discovery.AddressTypeIPv6:
		return v1.IPv6Protocol, true
	}
	return "", false
}

// convertSlice validates a slice. Invalid ports and endpoints are skipped
// one by one; a slice of an address type the proxier does not program
// (FQDN) yields nothing.
func convertSlice(s *discovery.EndpointSlice, nodeName string, topologies *topologyInterner, invalid InvalidFunc) *sliceEndpoints {
	want, ok := sliceFamily(s)
	if !ok {
		return &sliceEndpoints{}
	}
	tally := newSkipTally(invalid)
	defer tally.log("Skipped invalid parts of an EndpointSlice (a buggy controller?); details at -v=2", s)
	out := &sliceEndpoints{ports: convertSlicePorts(s, tally.record)}
	if len(s.Endpoints) == 0 {
		return out
	}
	eps := make([]Endpoint, 0, len(s.Endpoints))
	for i := range s.Endpoints {
		if ep, ok := convertEndpoint(s, &s.Endpoints[i], want, nodeName, topologies, tally.record); ok {
			if len(out.ports) == 1 {
				ep.Port = out.ports[0].port
			}
			eps = append(eps, ep)
		}
	}
	out.endpoints = dedupEndpoints(eps)
	return out
}

// dedupEndpoints sorts endpoints by address and keeps one of each: the
// most usable copy (ready over serving over neither), the first of equals.
// The result is sized to fit, nil when empty.
func dedupEndpoints(eps []Endpoint) []Endpoint {
	slices.SortStableFunc(eps, compareEndpoints)
	out := eps[:0]
	for _, e := range eps {
		if n := len(out); n > 0 && out[n-1].Key() == e.Key() {
			if rank(e) > rank(out[n-1]) {
				out[n-1] = e
			}
			continue
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil
	}
	if cap(out) > len(out) {
		out = slices.Clone(out)
	}
	return out
}

func convertSlicePorts(s *discovery.EndpointSlice, invalid InvalidFunc) []slicePort {
	var out []slicePort
	for _, p := range s.Ports {
		if p.Port == nil || !validPort(*p.Port) {
			invalid("EndpointSlice", "port")
			klog.V(2).InfoS("Skipping endpoint slice port without a valid number", "slice", klog.KObj(s))
			continue
		}
		sp := slicePort{protocol: v1.ProtocolTCP, port: uint16(*p.Port)}
		if p.Name != nil {
			sp.name = intern(*p.Name)
		}
		if p.Protocol != nil {
			sp.protocol = canonicalProtocol(*p.Protocol)
		}
		if !validProtocol(sp.protocol) {
			invalid("EndpointSlice", "protocol")
			continue
		}
		out = append(out, sp)
	}
	return out
}

func convertEndpoint(s *discovery.EndpointSlice, e *discovery.Endpoint, want v1.IPFamily, nodeName string, topologies *topologyInterner, invalid InvalidFunc) (Endpoint, bool) {
	if len(e.Addresses) == 0 {
		invalid("Endpoint", "address")
		klog.V(2).InfoS("Skipping endpoint without addresses", "slice", klog.KObj(s))
		return Endpoint{}, false
	}
	// Like kube-proxy, only the first address is used: the others are
	// fungible copies of it.
	ip, err := netip.ParseAddr(e.Addresses[0])
	if err != nil || ip.Zone() != "" || FamilyOf(ip.Unmap()) != want || ip.IsUnspecified() {
		invalid("Endpoint", "address")
		klog.V(2).InfoS("Skipping endpoint with an invalid address", "slice", klog.KObj(s), "address", e.Addresses[0])
		return Endpoint{}, false
	}
	ep := Endpoint{
		IP: ip.Unmap(),
		// API contract (discovery/v1 EndpointConditions): nil ready and
		// nil serving mean true, nil terminating means false.
		Ready:       e.Conditions.Ready == nil || *e.Conditions.Ready,
		Serving:     e.Conditions.Serving == nil || *e.Conditions.Serving,
		Terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
	}
	if e.NodeName != nil {
		ep.NodeName = intern(*e.NodeName)
		ep.IsLocal = nodeName != "" && ep.NodeName == nodeName
	}
	ep.Topology = topologies.get(e.Zone, e.Hints)
	return ep, true
}

// mergeSlices merges the slices of one service (sorted by name) into
// endpoints per service port, sorted and de-duplicated: for a duplicate
// endpoint the most usable copy (ready over serving over neither) wins,
// the copy of the first slice by name among equals. A Service with one
// single-port slice uses that slice's endpoints as they are.
func mergeSlices(svc types.NamespacedName, infos []*sliceInfo) []portEndpoints {
	if len(infos) == 1 && len(infos[0].ports) == 1 {
		p := infos[0].ports[0]
		return []portEndpoints{{name: ServicePortName{NamespacedName: svc, Port: p.name, Protocol: p.protocol}, endpoints: infos[0].endpoints}}
	}
	byPort := map[ServicePortName][]Endpoint{}
	for _, se := range infos {
		for _, p := range se.ports {
			spn := ServicePortName{NamespacedName: svc, Port: p.name, Protocol: p.protocol}
			eps := byPort[spn]
			for _, ep := range se.endpoints {
				ep.Port = p.port
				eps = append(eps, ep)
			}
			byPort[spn] = eps
		}
	}
	if len(byPort) == 0 {
		return nil
	}
	out := make([]portEndpoints, 0, len(byPort))
	for spn, eps := range byPort {
		out = append(out, portEndpoints{name: spn, endpoints: dedupEndpoints(eps)})
	}
	slices.SortFunc(out, func(a, b portEndpoints) int { return compareNames(a.name, b.name) })
	return out
}

// portEndpoints is one service port's merged endpoints.
type portEndpoints struct {
	name      ServicePortName
	endpoints []Endpoint
}

func rank(e Endpoint) int {
	switch {
	case e.Ready:
		return 2
	case e.Serving:
		return 1
	}
	return 0
}

// triggerTime reads the endpoints.kubernetes.io/last-change-trigger-time
// annotation: when the change that caused this slice update happened.
func triggerTime(s *discovery.EndpointSlice) (time.Time, bool) {
	v, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}
