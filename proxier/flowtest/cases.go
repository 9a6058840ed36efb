package flowtest

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// packet builds a TCP packet from src, arriving on iif ("" for the node's
// own traffic).
func packet(src, iif, dst string, port uint16) Packet {
	return Packet{SrcIP: netip.MustParseAddr(src), SrcLocal: iif == "", InInterface: iif,
		DstIP: netip.MustParseAddr(dst), DstPort: port, Protocol: v1.ProtocolTCP}
}

func fromPod(dst string, port uint16) Packet     { return packet(podClient, bridge, dst, port) }
func fromOutside(dst string, port uint16) Packet { return packet(outsider, uplink, dst, port) }
func fromNode(dst string, port uint16) Packet    { return packet(nodeIPv4, "", dst, port) }

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

// row is a case whose outcome is the same under every detector.
func row(name string, p Packet, e Expect) Case { return Case{Name: name, Packet: p, Expect: e} }

// Cases is the packet-flow table for Fixture. Each row cites the
// Kubernetes behaviour it pins.
func Cases() []Case {
	cases := [][]Case{clusterIPCases(), externalCases(), policyCases(), otherCases(), detectorCases()}
	var all []Case
	for _, cs := range cases {
		for _, c := range cs {
			c.Packet.Name = c.Name
			all = append(all, c)
		}
	}
	return all
}

// CasesFor is the table under a variant: pods on this node send through
// its pod interface, and each case expects what it does under its
// detector (ByDetector folded into Expect).
func CasesFor(v Variant) []Case {
	cases := Cases()
	for i := range cases {
		c := &cases[i]
		if c.Packet.InInterface == bridge {
			c.Packet.InInterface = v.PodInterface
		}
		c.Expect, c.ByDetector = c.expectFor(v.Name), nil
	}
	return cases
}

// noDetector is the variant without local-traffic detection (ClusterCIDR
// mode and no cluster CIDR). kube-proxy then writes neither the masquerade
// rule for cluster-IP traffic from outside the pod network nor the pod
// short-circuit of externalTrafficPolicy Local: nothing is local.
const noDetector = "none"

// notByCIDR names the variants that do not call every source in the
// cluster CIDR local.
func notByCIDR(e Expect) map[string]Expect {
	return map[string]Expect{"NodeCIDR": e, "BridgeInterface": e, "InterfaceNamePrefix": e, noDetector: e}
}

// detectorCases tell the local-traffic detectors apart: a pod of another
// node (in the cluster CIDR, not in this node's pod CIDR, arriving on the
// uplink) and a pod of this node whose address is outside the cluster
// CIDR (on the pod interface; e.g. an IP pool the cluster CIDR does not
// cover).
func detectorCases() []Case {
	web := []string{"10.244.1.2:8080", "10.244.2.3:8080", "10.244.2.4:8080"}
	local := []string{"10.244.1.30:8080", "10.244.2.31:8080"}
	byIface := func(pods, others Expect) map[string]Expect {
		return map[string]Expect{"NodeCIDR": others, "BridgeInterface": pods, "InterfaceNamePrefix": pods, noDetector: pods}
	}
	remoteCIP := byIface(masq(web...), masq(web...))
	remoteCIP[noDetector] = reach(web...)
	offCIDRLB := byIface(reach(local...), reach("10.244.1.30:8080"))
	offCIDRLB[noDetector] = reach("10.244.1.30:8080")
	return []Case{
		{Name: "remote pod to cluster IP: local only by cluster CIDR", Packet: packet(remotePod, uplink, "10.96.0.10", 80),
			Expect: reach(web...), ByDetector: remoteCIP},
		{Name: "remote pod to eTP=Local NodePort: short-circuited only by cluster CIDR", Packet: packet(remotePod, uplink, nodeIPv4, 30030),
			Expect: reach(local...), ByDetector: notByCIDR(reach("10.244.1.30:8080"))},
		{Name: "pod outside the cluster CIDR to cluster IP: local only by interface", Packet: packet(offCIDRPod, bridge, "10.96.0.10", 80),
			Expect: masq(web...), ByDetector: byIface(reach(web...), masq(web...))},
		{Name: "pod outside the cluster CIDR to eTP=Local LB IP: short-circuited only by interface", Packet: packet(offCIDRPod, bridge, "198.51.100.30", 80),
			Expect: reach("10.244.1.30:8080"), ByDetector: offCIDRLB},
	}
}

func clusterIPCases() []Case {
	web := []string{"10.244.1.2:8080", "10.244.2.3:8080", "10.244.2.4:8080"}
	return []Case{
		// Ready endpoints only: the serving-terminating and the not-ready
		// endpoint are not used while ready ones exist.
		row("pod to cluster IP reaches every ready endpoint, unmasqueraded", fromPod("10.96.0.10", 80), reach(web...)),
		row("multi-port: the second port maps to its own target port", fromPod("10.96.0.10", 443),
			reach("10.244.1.2:8443", "10.244.2.3:8443", "10.244.2.4:8443")),
		row("cluster IP on a port the service does not have", fromPod("10.96.0.10", 81), nothing()),
		row("cluster IP with the wrong protocol", udp(fromPod("10.96.0.10", 80)), nothing()),
		// Sources outside the cluster CIDR are masqueraded so replies come
		// back through this node (kube-proxy's "! -s clusterCIDR" rule).
		{Name: "node to cluster IP is masqueraded", Packet: fromNode("10.96.0.10", 80), Expect: masq(web...),
			ByDetector: map[string]Expect{noDetector: reach(web...)}},
		{Name: "outside client to cluster IP is masqueraded", Packet: fromOutside("10.96.0.10", 80), Expect: masq(web...),
			ByDetector: map[string]Expect{noDetector: reach(web...)}},
		row("UDP service", udp(fromPod("10.96.0.53", 53)), reach("10.244.1.7:53", "10.244.2.8:53")),
		row("TCP to a UDP-only service", fromPod("10.96.0.53", 53), nothing()),
	}
}

func externalCases() []Case {
	lb := []string{"10.244.1.20:8080", "10.244.2.21:8080"}
	local := []string{"10.244.1.30:8080", "10.244.2.31:8080"}
	return []Case{
		row("pod to cluster IP of a LoadBalancer service", fromPod("10.96.0.20", 80), reach(lb...)),
		// externalTrafficPolicy Cluster: external destinations are always
		// masqueraded, whoever the client is.
		row("outside client to NodePort on the node IP", fromOutside(nodeIPv4, 30080), masq(lb...)),
		row("node to its own NodePort", fromNode(nodeIPv4, 30080), masq(lb...)),
		row("pod to NodePort", fromPod(nodeIPv4, 30080), masq(lb...)),
		row("outside client to external IP", fromOutside("192.0.2.20", 80), masq(lb...)),
		row("outside client to load-balancer IP", fromOutside("198.51.100.20", 80), masq(lb...)),
		row("pod to load-balancer IP", fromPod("198.51.100.20", 80), masq(lb...)),
		row("node IP on a port that is no NodePort", fromOutside(nodeIPv4, 30081), nothing()),
		row("external IP on a port the service does not have", fromOutside("192.0.2.20", 81), nothing()),
		// externalTrafficPolicy Local: external clients reach only this
		// node's endpoints with their source kept; pods and the node
		// itself are treated as internal traffic (all endpoints; the node
		// masqueraded because its source is a node address).
		row("eTP=Local: outside client to NodePort reaches local endpoints only", fromOutside(nodeIPv4, 30030), reach("10.244.1.30:8080")),
		row("eTP=Local: outside client to external IP", fromOutside("192.0.2.30", 80), reach("10.244.1.30:8080")),
		row("eTP=Local: outside client to load-balancer IP", fromOutside("198.51.100.30", 80), reach("10.244.1.30:8080")),
		{Name: "eTP=Local: pod to NodePort reaches every endpoint", Packet: fromPod(nodeIPv4, 30030), Expect: reach(local...),
			ByDetector: map[string]Expect{noDetector: reach("10.244.1.30:8080")}},
		{Name: "eTP=Local: pod to load-balancer IP reaches every endpoint", Packet: fromPod("198.51.100.30", 80), Expect: reach(local...),
			ByDetector: map[string]Expect{noDetector: reach("10.244.1.30:8080")}},
		row("eTP=Local: node to NodePort reaches every endpoint, masqueraded", fromNode(nodeIPv4, 30030), masq(local...)),
		row("eTP=Local: pod to cluster IP", fromPod("10.96.0.30", 80), reach(local...)),
		// No local endpoint: external traffic is dropped (not rejected, so
		// a load balancer's health check moves it elsewhere), internal
		// traffic still reaches the endpoints elsewhere.
		row("eTP=Local, no local endpoint: outside client to NodePort is dropped", fromOutside(nodeIPv4, 30040), drop()),
		row("eTP=Local, no local endpoint: outside client to external IP is dropped", fromOutside("192.0.2.40", 80), drop()),
		row("eTP=Local, no local endpoint: pod to cluster IP", fromPod("10.96.0.40", 80), reach("10.244.2.41:8080", "10.244.2.42:8080")),
		{Name: "eTP=Local, no local endpoint: pod to external IP", Packet: fromPod("192.0.2.40", 80), Expect: reach("10.244.2.41:8080", "10.244.2.42:8080"),
			ByDetector: map[string]Expect{noDetector: drop()}},
	}
}

func policyCases() []Case {
	return []Case{
		// internalTrafficPolicy Local: cluster traffic only to this node's
		// endpoints; none here means DROP (there are endpoints elsewhere).
		row("iTP=Local: pod to cluster IP reaches local endpoints only", fromPod("10.96.0.50", 80), reach("10.244.1.51:8080")),
		row("iTP=Local, no local endpoint: pod to cluster IP is dropped", fromPod("10.96.0.55", 80), drop()),
		// No usable endpoint anywhere: REJECT, for every destination.
		row("no endpoints: cluster IP is rejected", fromPod("10.96.0.60", 80), reject()),
		row("no endpoints: NodePort is rejected", fromOutside(nodeIPv4, 30060), reject()),
		row("only unusable endpoints (not serving): rejected", fromPod("10.96.0.65", 80), reject()),
		// No ready endpoint: fall back to serving-terminating ones.
		row("terminating only: serving-terminating endpoints are used", fromPod("10.96.0.70", 80),
			reach("10.244.1.71:8080", "10.244.2.72:8080")),
		// ClientIP affinity pins later connections, but a new client may
		// land on any endpoint.
		row("session affinity: a new client may reach every endpoint", fromPod("10.96.0.80", 80),
			reach("10.244.1.81:8080", "10.244.2.82:8080")),
	}
}

func otherCases() []Case {
	web6 := []string{"[fd00:10:244:1::2]:8080", "[fd00:10:244:2::3]:8080"}
	return []Case{
		row("IPv6: pod to cluster IP", packet(podClient6, bridge, "fd00:10:96::10", 80), reach(web6...)),
		row("IPv6: outside client to NodePort", packet(outsider6, uplink, nodeIPv6, 30090), masq(web6...)),
		row("IPv6: cluster IP on a port the service does not have", packet(podClient6, bridge, "fd00:10:96::10", 81), nothing()),
		row("unallocated address in the service range", fromPod(nonService, 80), nothing()),
		row("node IP on a port no service uses", fromOutside(nodeIPv4, notNodePort), nothing()),
	}
}
