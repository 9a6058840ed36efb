package proxier

import (
	"net/netip"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Builders of real client-go objects for the tests of this package.

const testNS = "ns"

func makeService(name string, mods ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"},
			Ports:      []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	for _, m := range mods {
		m(svc)
	}
	return svc
}

func withClusterIPs(ips ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.ClusterIP = ips[0]
		s.Spec.ClusterIPs = ips
	}
}

func withPorts(ports ...v1.ServicePort) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.Ports = ports }
}

func withLabels(kv ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Labels[kv[i]] = kv[i+1]
		}
	}
}

func tcpPort(name string, port int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: port, Protocol: v1.ProtocolTCP}
}

func udpPort(name string, port int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: port, Protocol: v1.ProtocolUDP}
}

// sliceEP describes one endpoint of a test slice.
type sliceEP struct {
	addrs       []string
	ready       *bool
	serving     *bool
	terminating *bool
	node        string
	zone        string
	zoneHints   []string
	nodeHints   []string
}

func ep(addr string) sliceEP { return sliceEP{addrs: []string{addr}} }

func (e sliceEP) notReady() sliceEP {
	e.ready, e.serving, e.terminating = ptr.To(false), ptr.To(false), ptr.To(false)
	return e
}

func (e sliceEP) servingTerminating() sliceEP {
	e.ready, e.serving, e.terminating = ptr.To(false), ptr.To(true), ptr.To(true)
	return e
}

func (e sliceEP) on(node string) sliceEP { e.node = node; return e }

func (e sliceEP) inZone(zone string, hints ...string) sliceEP {
	e.zone, e.zoneHints = zone, hints
	return e
}

func (e sliceEP) forNodes(nodes ...string) sliceEP { e.nodeHints = nodes; return e }

func (e sliceEP) build() discovery.Endpoint {
	out := discovery.Endpoint{
		Addresses: e.addrs,
		Conditions: discovery.EndpointConditions{
			Ready: e.ready, Serving: e.serving, Terminating: e.terminating,
		},
	}
	if e.node != "" {
		out.NodeName = ptr.To(e.node)
	}
	if e.zone != "" {
		out.Zone = ptr.To(e.zone)
	}
	if len(e.zoneHints)+len(e.nodeHints) > 0 {
		out.Hints = &discovery.EndpointHints{}
		for _, z := range e.zoneHints {
			out.Hints.ForZones = append(out.Hints.ForZones, discovery.ForZone{Name: z})
		}
		for _, n := range e.nodeHints {
			out.Hints.ForNodes = append(out.Hints.ForNodes, discovery.ForNode{Name: n})
		}
	}
	return out
}

func slicePortSpec(name string, port int32, proto v1.Protocol) discovery.EndpointPort {
	return discovery.EndpointPort{Name: ptr.To(name), Port: ptr.To(port), Protocol: ptr.To(proto)}
}

// makeSlice builds an IPv4 EndpointSlice of service svc with one TCP port
// "http" 8080 unless ports are given.
func makeSlice(svc, name string, eps []sliceEP, ports ...discovery.EndpointPort) *discovery.EndpointSlice {
	if len(ports) == 0 {
		ports = []discovery.EndpointPort{slicePortSpec("http", 8080, v1.ProtocolTCP)}
	}
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: svc},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, e.build())
	}
	return s
}

func spn(svc, port string, proto v1.Protocol) ServicePortName {
	return ServicePortName{NamespacedName: types.NamespacedName{Namespace: testNS, Name: svc}, Port: port, Protocol: proto}
}

func httpPort(svc string) ServicePortName { return spn(svc, "http", v1.ProtocolTCP) }

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// endpointKeys renders endpoints as "ip:port" in order, for compact asserts.
func endpointKeys(eps []Endpoint) []string {
	out := make([]string, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.String())
	}
	return out
}

func staleKeys(st []StaleEndpoint) []string {
	out := make([]string, 0, len(st))
	for _, s := range st {
		out = append(out, s.Name.String()+"="+s.Endpoint.String())
	}
	slices.Sort(out)
	return out
}

func nameSet(m map[ServicePortName]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k.String()+"/"+string(k.Protocol))
	}
	slices.Sort(out)
	return out
}

// invalidRecorder is an InvalidFunc that remembers what it was told.
type invalidRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *invalidRecorder) fn(kind, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, kind+"/"+reason)
}

func (r *invalidRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}
