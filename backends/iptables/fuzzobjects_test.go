package iptables

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// fuzzInput turns fuzzer bytes into field values. Past the end it yields
// zeros, so every input is a valid program.
type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzInput) intn(n int) int { return int(in.byte()) % n }
func (in *fuzzInput) bool() bool     { return in.byte()&1 == 1 }
func (in *fuzzInput) done() bool     { return len(in.b) == 0 }

func pick[T any](in *fuzzInput, choices []T) T { return choices[in.intn(len(choices))] }

// port is an int32 that is often one of the interesting values (0, the
// bounds, out of range) and otherwise raw bytes.
func (in *fuzzInput) port() int32 {
	special := []int32{0, -1, 1, 53, 80, 8080, 30000, 32767, 65535, 65536, 1 << 30, -1 << 31}
	if in.bool() {
		return pick(in, special)
	}
	return int32(in.byte())<<8 | int32(in.byte())
}

// Pools of values, valid and invalid, that the fuzzer combines. Few names
// make updates, duplicates and conflicting slices likely.
var (
	fuzzNamespaces = []string{"ns1", "ns2"}
	fuzzNames      = []string{"a", "b", "c"}
	fuzzPortNames  = []string{"", "http", "dns", "http", "a-port-name-longer-than-fifteen"}
	fuzzProtocols  = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP, "", "ICMP", "tcp"}
	fuzzServiceIPs = []string{"10.96.0.1", "10.96.0.2", "fd00:96::1", "::ffff:10.96.0.3", "", "None", "not-an-ip",
		"10.96.0.1%eth0", "0.0.0.0", "::", "255.255.255.255", "224.0.0.1", "127.0.0.1", "fe80::1", "10.96.0.1/32"}
	fuzzEndpointIPs = []string{"10.244.0.5", "10.244.0.6", "10.244.1.7", "fd00:244::5", "fd00:244::6", "::ffff:10.244.0.8",
		"", "garbage", "0.0.0.0", "::", "10.244.0.5%eth0", "127.0.0.1", "169.254.1.1", "224.0.0.5", "10.244.0.5 "}
	fuzzCIDRs = []string{"10.0.0.0/8", "192.168.0.0/16", "fd00::/8", "0.0.0.0/0", "bad", "10.1.2.3/33", "::/0"}
)

// fuzzService builds a Service from the input: every field the proxier
// reads, with values the API would and would not accept.
func fuzzService(in *fuzzInput, ns, name string) *v1.Service {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	svc.Spec.Type = pick(in, []v1.ServiceType{v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeExternalName, ""})
	svc.Spec.ClusterIP = pick(in, fuzzServiceIPs)
	for range in.intn(3) {
		svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, pick(in, fuzzServiceIPs))
	}
	nPorts := in.intn(4)
	if in.intn(32) == 0 {
		nPorts = 100 + in.intn(100) // a huge port list
	}
	for i := range nPorts {
		p := v1.ServicePort{Name: pick(in, fuzzPortNames), Protocol: pick(in, fuzzProtocols), Port: in.port()}
		if nPorts > 4 {
			p.Name, p.Port = fmt.Sprintf("p%d", i), int32(1000+i)
		}
		if in.bool() {
			p.NodePort = in.port()
		}
		svc.Spec.Ports = append(svc.Spec.Ports, p)
	}
	fuzzServiceExtras(in, svc)
	return svc
}

func fuzzServiceExtras(in *fuzzInput, svc *v1.Service) {
	for range in.intn(3) {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, pick(in, append(fuzzServiceIPs, "203.0.113.1", "2001:db8::1")))
	}
	for range in.intn(3) {
		ing := v1.LoadBalancerIngress{IP: pick(in, append(fuzzServiceIPs, "198.51.100.1"))}
		if in.bool() {
			ing.IPMode = ptr.To(pick(in, []v1.LoadBalancerIPMode{v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy, "bogus"}))
		}
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, ing)
	}
	for range in.intn(3) {
		svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, pick(in, fuzzCIDRs))
	}
	svc.Spec.ExternalTrafficPolicy = pick(in, []v1.ServiceExternalTrafficPolicy{"", v1.ServiceExternalTrafficPolicyLocal, v1.ServiceExternalTrafficPolicyCluster})
	if in.bool() {
		svc.Spec.InternalTrafficPolicy = ptr.To(pick(in, []v1.ServiceInternalTrafficPolicy{v1.ServiceInternalTrafficPolicyLocal, v1.ServiceInternalTrafficPolicyCluster, "x"}))
	}
	svc.Spec.HealthCheckNodePort = in.port()
	if in.bool() {
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		if in.bool() {
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(in.port())}}
		}
	}
	if in.bool() {
		svc.Spec.TrafficDistribution = ptr.To(pick(in, []string{"PreferClose", "PreferSameZone", "PreferSameNode", "bogus"}))
	}
}

// fuzzSlice builds an EndpointSlice for service name (or for none).
func fuzzSlice(in *fuzzInput, ns, name, sliceName string) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sliceName, Labels: map[string]string{}}}
	if in.intn(8) != 0 {
		s.Labels[discovery.LabelServiceName] = name
	}
	s.AddressType = pick(in, []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv4, discovery.AddressTypeIPv6, discovery.AddressTypeFQDN, "junk"})
	for range in.intn(4) {
		p := discovery.EndpointPort{}
		if in.intn(4) != 0 {
			p.Port = ptr.To(in.port())
		}
		if in.bool() {
			p.Name = ptr.To(pick(in, fuzzPortNames))
		}
		if in.bool() {
			p.Protocol = ptr.To(pick(in, fuzzProtocols))
		}
		s.Ports = append(s.Ports, p)
	}
	n := in.intn(5)
	if in.intn(32) == 0 {
		n = 300 // many (TestThousandEndpointsInOneSlice covers the API's maximum)
	}
	for i := range n {
		s.Endpoints = append(s.Endpoints, fuzzEndpoint(in, i, n > 5))
	}
	return s
}

func fuzzEndpoint(in *fuzzInput, i int, many bool) discovery.Endpoint {
	var e discovery.Endpoint
	if many {
		e.Addresses = []string{fmt.Sprintf("10.%d.%d.%d", 100+i>>16, i>>8&255, i&255)}
	} else {
		for range in.intn(3) {
			e.Addresses = append(e.Addresses, pick(in, fuzzEndpointIPs))
		}
	}
	cond := func() *bool {
		return pick(in, []*bool{nil, ptr.To(true), ptr.To(false)})
	}
	e.Conditions = discovery.EndpointConditions{Ready: cond(), Serving: cond(), Terminating: cond()}
	if in.bool() {
		e.NodeName = ptr.To(pick(in, []string{testNode, "node-b", ""}))
	}
	if in.bool() {
		e.Zone = ptr.To(pick(in, []string{"zone-a", "zone-b", ""}))
	}
	if in.bool() {
		e.Hints = &discovery.EndpointHints{
			ForZones: []discovery.ForZone{{Name: pick(in, []string{"zone-a", "zone-b"})}},
			ForNodes: []discovery.ForNode{{Name: pick(in, []string{testNode, "node-b"})}},
		}
	}
	return e
}

// fuzzNode is this node with fuzzed zone and addresses.
func fuzzNode(in *fuzzInput) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{}}}
	if in.bool() {
		n.Labels[v1.LabelTopologyZone] = pick(in, []string{"zone-a", "zone-b"})
	}
	for range in.intn(3) {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{
			Type:    pick(in, []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP, v1.NodeHostName}),
			Address: pick(in, []string{"192.168.1.10", "192.168.1.11", "fd00:1::10", "bad", ""}),
		})
	}
	return n
}
