package conntrack

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

func addressCases() []cleanupCase {
	return []cleanupCase{{
		name: "entries that are not service traffic stay",
		st:   state(dnsService(), eps(ready(epB))),
		diff: staleDiff(dnsName, epA),
		keep: []conntracktest.Entry{
			conntracktest.Plain(conntracktest.UDP, c(1), epA),                                 // pod to pod
			udpVia(c(2), clusterIP, 54, epA),                                                  // other port
			udpVia(c(3), addr("10.0.0.99"), 30053, epA),                                       // not a node address
			udpVia(c(4), addr("10.96.0.11"), 53, epA),                                         // other address
			conntracktest.NATed(conntracktest.UDP, epA, netip.AddrPortFrom(nodeIP, 53), c(5)), // from the old endpoint
		},
		deleted: []conntracktest.Entry{udpVia(c(6), clusterIP, 53, epA)},
	}, {
		name: "NodePort on node address and configured node address",
		cfg:  Config{NodeIPs: []netip.Addr{addr("127.0.0.1")}},
		st:   state(dnsService(), eps(ready(epB))),
		diff: staleDiff(dnsName, epA),
		keep: []conntracktest.Entry{
			udpVia(c(7), nodeIP, 30053, epB),
			udpVia(c(8), addr("10.0.0.99"), 30053, epA),
		},
		deleted: []conntracktest.Entry{
			udpVia(c(9), nodeIP, 30053, epA),
			conntracktest.NATed(conntracktest.UDP, addrPort("127.0.0.1:40000"), addrPort("127.0.0.1:30053"), epA),
		},
	}, {
		name: "external and load-balancer IPs",
		st:   state(dnsService(), eps(ready(epB))),
		diff: staleDiff(dnsName, epA),
		keep: []conntracktest.Entry{
			udpVia(c(10), externalIP, 53, epB),
			udpVia(c(11), lbIP, 53, epB),
		},
		deleted: []conntracktest.Entry{
			udpVia(c(12), externalIP, 53, epA),
			udpVia(c(13), lbIP, 53, epA),
		},
	}, {
		name: "hostNetwork endpoint on the node address is reachable",
		st:   state(dnsService(), eps(ready(netip.AddrPortFrom(nodeIP, 53)))),
		diff: staleDiff(dnsName, epA),
		keep: []conntracktest.Entry{
			udpVia(c(14), nodeIP, 30053, netip.AddrPortFrom(nodeIP, 53)),
			udpVia(c(15), clusterIP, 53, netip.AddrPortFrom(nodeIP, 53)),
		},
		deleted: []conntracktest.Entry{
			conntracktest.Plain(conntracktest.UDP, c(16), netip.AddrPortFrom(nodeIP, 30053)),
		},
	}, {
		name: "SCTP matched by address and port, like UDP",
		st:   state(sctpService(), eps(ready(addrPort("10.244.2.10:9999")))),
		diff: staleDiff(sctpName, addrPort("10.244.1.10:9999")),
		keep: []conntracktest.Entry{
			conntracktest.NATed(conntracktest.SCTP, c(17), addrPort("10.96.0.20:9999"), addrPort("10.244.2.10:9999")),
			conntracktest.NATed(conntracktest.UDP, c(18), addrPort("10.96.0.20:9999"), addrPort("10.244.1.10:9999")),
		},
		deleted: []conntracktest.Entry{
			conntracktest.NATed(conntracktest.SCTP, c(19), addrPort("10.96.0.20:9999"), addrPort("10.244.1.10:9999")),
			// The endpoint's address is still an endpoint, its old
			// port is not: by address alone this one was kept.
			conntracktest.NATed(conntracktest.SCTP, c(20), addrPort("10.96.0.20:9999"), addrPort("10.244.2.10:9998")),
		},
	}}
}

var sctpName = portName("sig", "sctp", v1.ProtocolSCTP)

func sctpService() *proxier.ServicePort {
	return &proxier.ServicePort{Name: sctpName, Protocol: v1.ProtocolSCTP, Port: 9999,
		ClusterIPs: []netip.Addr{addr("10.96.0.20")}}
}

var (
	clusterIP6 = addr("fd00:96::10")
	epA6       = addrPort("[fd00:244:1::10]:53")
	epB6       = addrPort("[fd00:244:2::10]:53")
)

func dualStackService() *proxier.ServicePort {
	sp := dnsService()
	sp.ClusterIPs = append(sp.ClusterIPs, clusterIP6)
	return sp
}

func familyCases() []cleanupCase {
	v4v6 := []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	return []cleanupCase{{
		name: "IPv6 only",
		cfg:  Config{Families: []v1.IPFamily{v1.IPv6Protocol}},
		st:   state(dualStackService(), eps(ready(epA), ready(epB6))),
		diff: staleDiff(dnsName, epA6, epB),
		keep: []conntracktest.Entry{
			udpVia(c6(1), clusterIP6, 53, epB6),
			udpVia(c(20), clusterIP, 53, epB), // IPv4 not configured
		},
		deleted: []conntracktest.Entry{udpVia(c6(2), clusterIP6, 53, epA6)},
	}, {
		name: "dual stack: endpoints selected per family",
		cfg:  Config{Families: v4v6},
		st:   state(dualStackService(), eps(ready(epA), ready(epB6))),
		diff: staleDiff(dnsName, epA6, epB),
		keep: []conntracktest.Entry{
			udpVia(c6(3), clusterIP6, 53, epB6),
			udpVia(c(21), clusterIP, 53, epA),
		},
		deleted: []conntracktest.Entry{
			udpVia(c6(4), clusterIP6, 53, epA6),
			udpVia(c(22), clusterIP, 53, epB),
		},
	}, {
		name:    "IPv4-mapped endpoint address matches the IPv4 reply source",
		st:      state(dnsService(), eps(ready(netip.AddrPortFrom(netip.AddrFrom16(epB.Addr().As16()), 53)))),
		diff:    staleDiff(dnsName, epA),
		keep:    []conntracktest.Entry{udpVia(c(1), clusterIP, 53, epB)},
		deleted: []conntracktest.Entry{udpVia(c(2), clusterIP, 53, epA)},
	}}
}

// c6 returns the n-th IPv6 client.
func c6(n int) netip.AddrPort { return netip.AddrPortFrom(addr("fd00:244:3::5"), uint16(40000+n)) }
