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
	endpoints []Endpoint // Port unset: it comes from ports
}

type slicePort struct {
	name     string
	protocol v1.Protocol
	port     uint16
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

// convertSlice validates a slice. Invalid ports and endpoints are skipped
// one by one; a slice of an address type the proxier does not program
// (FQDN) yields nothing.
func convertSlice(s *discovery.EndpointSlice, nodeName string, invalid InvalidFunc) *sliceEndpoints {
	var want v1.IPFamily
	switch s.AddressType {
	case discovery.AddressTypeIPv4:
		want = v1.IPv4Protocol
	case discovery.AddressTypeIPv6:
		want = v1.IPv6Protocol
	default:
		return &sliceEndpoints{}
	}
	tally := newSkipTally(invalid)
	defer tally.log("Skipped invalid parts of an EndpointSlice (a buggy controller?); details at -v=2", s)
	out := &sliceEndpoints{ports: convertSlicePorts(s, tally.record)}
	for i := range s.Endpoints {
		if ep, ok := convertEndpoint(s, &s.Endpoints[i], want, nodeName, tally.record); ok {
			out.endpoints = append(out.endpoints, ep)
		}
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
			sp.name = *p.Name
		}
		if p.Protocol != nil {
			sp.protocol = *p.Protocol
		}
		if !validProtocol(sp.protocol) {
			invalid("EndpointSlice", "protocol")
			continue
		}
		out = append(out, sp)
	}
	return out
}

func convertEndpoint(s *discovery.EndpointSlice, e *discovery.Endpoint, want v1.IPFamily, nodeName string, invalid InvalidFunc) (Endpoint, bool) {
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
		ep.NodeName = *e.NodeName
		ep.IsLocal = nodeName != "" && ep.NodeName == nodeName
	}
	if e.Zone != nil {
		ep.Zone = *e.Zone
	}
	if e.Hints != nil {
		for _, z := range e.Hints.ForZones {
			ep.ZoneHints = append(ep.ZoneHints, z.Name)
		}
		for _, n := range e.Hints.ForNodes {
			ep.NodeHints = append(ep.NodeHints, n.Name)
		}
	}
	return ep, true
}

// mergeSlices merges the slices of one service into endpoints per service
// port, sorted and de-duplicated. Slices are visited in name order so the
// result is deterministic; for a duplicate endpoint the most usable copy
// (ready over serving over neither) wins.
func mergeSlices(svc types.NamespacedName, slicesByName map[string]*sliceEndpoints) map[ServicePortName][]Endpoint {
	names := make([]string, 0, len(slicesByName))
	for n := range slicesByName {
		names = append(names, n)
	}
	slices.Sort(names)
	byPort := map[ServicePortName]map[netip.AddrPort]Endpoint{}
	for _, n := range names {
		se := slicesByName[n]
		for _, p := range se.ports {
			spn := ServicePortName{NamespacedName: svc, Port: p.name, Protocol: p.protocol}
			m := byPort[spn]
			if m == nil {
				m = map[netip.AddrPort]Endpoint{}
				byPort[spn] = m
			}
			for _, ep := range se.endpoints {
				ep.Port = p.port
				if old, dup := m[ep.Key()]; !dup || rank(ep) > rank(old) {
					m[ep.Key()] = ep
				}
			}
		}
	}
	return sortEndpointMaps(byPort)
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

func sortEndpointMaps(byPort map[ServicePortName]map[netip.AddrPort]Endpoint) map[ServicePortName][]Endpoint {
	out := make(map[ServicePortName][]Endpoint, len(byPort))
	for spn, m := range byPort {
		eps := make([]Endpoint, 0, len(m))
		for _, ep := range m {
			eps = append(eps, ep)
		}
		slices.SortFunc(eps, compareEndpoints)
		out[spn] = eps
	}
	return out
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
