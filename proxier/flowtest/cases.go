package flowtest

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

func packet(src string, local bool, dst string, port uint16, proto v1.Protocol) Packet {
	return Packet{SrcIP: netip.MustParseAddr(src), SrcLocal: local, DstIP: netip.MustParseAddr(dst), DstPort: port, Protocol: proto}
}

func fromPod(dst string, port uint16) Packet {
	return packet(podClient, false, dst, port, v1.ProtocolTCP)
}
func fromOutside(dst string, port uint16) Packet {
	return packet(outsider, false, dst, port, v1.ProtocolTCP)
}
func fromNode(dst string, port uint16) Packet {
	return packet(nodeIPv4, true, dst, port, v1.ProtocolTCP)
}

func udp(p Packet) Packet { p.Protocol = v1.ProtocolUDP; return p }

// reach: the endpoints, source kept. masq: the endpoints, masqueraded.
func reach(eps ...string) Expect { return Expect{Endpoints: eps, MasqChecked: true} }
func masq(eps ...string) Expect {
	return Expect{Endpoints: eps, Masquerade: true, MasqChecked: true}
}

// nothing: no service matched; untouched, not masqueraded.
func nothing() Expect { return Expect{MasqChecked: true} }
func drop() Expect    { return Expect{Drop: true} }
func reject() Expect  { return Expect{Reject: true} }

// Cases is the packet-flow table for Fixture. Each row cites the
// Kubernetes behaviour it pins.
func Cases() []Case {
	cases := [][]Case{clusterIPCases(), externalCases(), policyCases(), otherCases()}
	var all []Case
	for _, cs := range cases {
		for _, c := range cs {
			c.Packet.Name = c.Name
			all = append(all, c)
		}
	}
	return all
}

func clusterIPCases() []Case {
	web := []string{"10.244.1.2:8080", "10.244.2.3:8080", "10.244.2.4:8080"}
	return []Case{
		// Ready endpoints only: the serving-terminating and the not-ready
		// endpoint are not used while ready ones exist.
		{"pod to cluster IP reaches every ready endpoint, unmasqueraded", fromPod("10.96.0.10", 80), reach(web...)},
		{"multi-port: the second port maps to its own target port", fromPod("10.96.0.10", 443),
			reach("10.244.1.2:8443", "10.244.2.3:8443", "10.244.2.4:8443")},
		{"cluster IP on a port the service does not have", fromPod("10.96.0.10", 81), nothing()},
		{"cluster IP with the wrong protocol", udp(fromPod("10.96.0.10", 80)), nothing()},
		// Sources outside the cluster CIDR are masqueraded so replies come
		// back through this node (kube-proxy's "! -s clusterCIDR" rule).
		{"node to cluster IP is masqueraded", fromNode("10.96.0.10", 80), masq(web...)},
		{"outside client to cluster IP is masqueraded", fromOutside("10.96.0.10", 80), masq(web...)},
		{"UDP service", udp(fromPod("10.96.0.53", 53)), reach("10.244.1.7:53", "10.244.2.8:53")},
		{"TCP to a UDP-only service", fromPod("10.96.0.53", 53), nothing()},
	}
}

func externalCases() []Case {
	lb := []string{"10.244.1.20:8080", "10.244.2.21:8080"}
	local := []string{"10.244.1.30:8080", "10.244.2.31:8080"}
	return []Case{
		{"pod to cluster IP of a LoadBalancer service", fromPod("10.96.0.20", 80), reach(lb...)},
		// externalTrafficPolicy Cluster: external destinations are always
		// masqueraded, whoever the client is.
		{"outside client to NodePort on the node IP", fromOutside(nodeIPv4, 30080), masq(lb...)},
		{"node to its own NodePort", fromNode(nodeIPv4, 30080), masq(lb...)},
		{"pod to NodePort", fromPod(nodeIPv4, 30080), masq(lb...)},
		{"outside client to external IP", fromOutside("192.0.2.20", 80), masq(lb...)},
		{"outside client to load-balancer IP", fromOutside("198.51.100.20", 80), masq(lb...)},
		{"pod to load-balancer IP", fromPod("198.51.100.20", 80), masq(lb...)},
		{"node IP on a port that is no NodePort", fromOutside(nodeIPv4, 30081), nothing()},
		{"external IP on a port the service does not have", fromOutside("192.0.2.20", 81), nothing()},
		// externalTrafficPolicy Local: external clients reach only this
		// node's endpoints with their source kept; pods and the node
		// itself are treated as internal traffic (all endpoints; the node
		// masqueraded because its source is a node address).
		{"eTP=Local: outside client to NodePort reaches local endpoints only", fromOutside(nodeIPv4, 30030), reach("10.244.1.30:8080")},
		{"eTP=Local: outside client to external IP", fromOutside("192.0.2.30", 80), reach("10.244.1.30:8080")},
		{"eTP=Local: outside client to load-balancer IP", fromOutside("198.51.100.30", 80), reach("10.244.1.30:8080")},
		{"eTP=Local: pod to NodePort reaches every endpoint", fromPod(nodeIPv4, 30030), reach(local...)},
		{"eTP=Local: pod to load-balancer IP reaches every endpoint", fromPod("198.51.100.30", 80), reach(local...)},
		{"eTP=Local: node to NodePort reaches every endpoint, masqueraded", fromNode(nodeIPv4, 30030), masq(local...)},
		{"eTP=Local: pod to cluster IP", fromPod("10.96.0.30", 80), reach(local...)},
		// No local endpoint: external traffic is dropped (not rejected, so
		// a load balancer's health check moves it elsewhere), internal
		// traffic still reaches the endpoints elsewhere.
		{"eTP=Local, no local endpoint: outside client to NodePort is dropped", fromOutside(nodeIPv4, 30040), drop()},
		{"eTP=Local, no local endpoint: outside client to external IP is dropped", fromOutside("192.0.2.40", 80), drop()},
		{"eTP=Local, no local endpoint: pod to cluster IP", fromPod("10.96.0.40", 80), reach("10.244.2.41:8080", "10.244.2.42:8080")},
		{"eTP=Local, no local endpoint: pod to external IP", fromPod("192.0.2.40", 80), reach("10.244.2.41:8080", "10.244.2.42:8080")},
	}
}

func policyCases() []Case {
	return []Case{
		// internalTrafficPolicy Local: cluster traffic only to this node's
		// endpoints; none here means DROP (there are endpoints elsewhere).
		{"iTP=Local: pod to cluster IP reaches local endpoints only", fromPod("10.96.0.50", 80), reach("10.244.1.51:8080")},
		{"iTP=Local, no local endpoint: pod to cluster IP is dropped", fromPod("10.96.0.55", 80), drop()},
		// No usable endpoint anywhere: REJECT, for every destination.
		{"no endpoints: cluster IP is rejected", fromPod("10.96.0.60", 80), reject()},
		{"no endpoints: NodePort is rejected", fromOutside(nodeIPv4, 30060), reject()},
		{"only unusable endpoints (not serving): rejected", fromPod("10.96.0.65", 80), reject()},
		// No ready endpoint: fall back to serving-terminating ones.
		{"terminating only: serving-terminating endpoints are used", fromPod("10.96.0.70", 80),
			reach("10.244.1.71:8080", "10.244.2.72:8080")},
		// ClientIP affinity pins later connections, but a new client may
		// land on any endpoint.
		{"session affinity: a new client may reach every endpoint", fromPod("10.96.0.80", 80),
			reach("10.244.1.81:8080", "10.244.2.82:8080")},
	}
}

func otherCases() []Case {
	web6 := []string{"[fd00:10:244:1::2]:8080", "[fd00:10:244:2::3]:8080"}
	return []Case{
		{"IPv6: pod to cluster IP", packet(podClient6, false, "fd00:10:96::10", 80, v1.ProtocolTCP), reach(web6...)},
		{"IPv6: outside client to NodePort", packet(outsider6, false, nodeIPv6, 30090, v1.ProtocolTCP), masq(web6...)},
		{"IPv6: cluster IP on a port the service does not have", packet(podClient6, false, "fd00:10:96::10", 81, v1.ProtocolTCP), nothing()},
		{"unallocated address in the service range", fromPod(nonService, 80), nothing()},
		{"node IP on a port no service uses", fromOutside(nodeIPv4, notNodePort), nothing()},
	}
}
