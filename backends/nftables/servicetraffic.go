package nftables

import (
	"context"
	"fmt"

	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Per-Service traffic counters (--service-traffic-metrics).
//
// Two sets keyed like "service-ips" (daddr . l4proto . dport), declared
// with "counter", so that each element counts the packets and bytes of
// the lookups it matched (kernel 5.11+). The filter chains at dstnat-10,
// which see the service address the client used before any DNAT, look
// every packet up in "service-traffic" and every new connection (ct state
// new) in "service-connections": one hash lookup per packet, two for the
// first packet of a flow, whatever the number of Services. Each address of
// a service port (cluster IP, external IPs, load-balancer IPs) is an
// element of both, commented "namespace/name:port" (nft shows it), so a
// service port's arrival or departure is element changes only and the
// counters name their Service themselves: reading them needs nothing of
// the daemon's state.
//
// What is counted: packets from clients to the service address (the
// original direction; replies are not), before the endpoint checks, so a
// connection refused for want of endpoints counts too. NodePorts count in
// two more counter sets keyed l4proto . dport, looked up under the
// NodePort rules' local-address match, behind a plain set of the counted
// NodePorts so that other packets pay one hash lookup, not the check. A
// partial sync leaves a port's elements, and their
// counts, alone unless its addresses change; a full sync over a table
// that is not this process's own (a repair, the hourly one) writes them
// afresh, which restarts their counts (Prometheus' rate() and increase()
// take resets in their stride).

// nftCounterSets are the two counter sets, with the label each feeds.
var nftCounterSets = []string{setServiceTraffic, setServiceConnections}

// trafficSets are the counter sets, when counting.
func trafficSets(fc *familyConfig) []*ruleset.Set {
	if !fc.serviceTraffic {
		return nil
	}
	return []*ruleset.Set{
		{Name: setServiceTraffic, Key: keyDst, Counter: true, Comment: "packets and bytes to each service address"},
		{Name: setServiceConnections, Key: keyDst, Counter: true, Comment: "new connections to each service address"},
		{Name: setNodePortCounted, Key: keyNodePort, Comment: "NodePorts whose traffic is counted"},
		{Name: setNodePortTraffic, Key: keyNodePort, Counter: true, Comment: "packets and bytes to each NodePort"},
		{Name: setNodePortConnections, Key: keyNodePort, Counter: true, Comment: "new connections to each NodePort"},
	}
}

// trafficRules are the lookups that update the counters, first in the
// filter chains (before a rejection for want of endpoints).
func trafficRules(fc *familyConfig) []ruleset.Rule {
	if !fc.serviceTraffic {
		return nil
	}
	rules := []ruleset.Rule{
		ruleset.R(ruleset.Lookup{Key: keyDst, Set: setServiceTraffic}).WithComment("count service traffic"),
		ruleset.R(newConn, ruleset.Lookup{Key: keyDst, Set: setServiceConnections}).WithComment("count service connections"),
	}
	rules = append(rules, nodePortCountRules(fc, "count NodePort traffic", ruleset.Lookup{Key: keyNodePort, Set: setNodePortTraffic})...)
	return append(rules, nodePortCountRules(fc, "count NodePort connections", newConn, ruleset.Lookup{Key: keyNodePort, Set: setNodePortConnections})...)
}

// nodePortCountRules are the NodePort rules (local addresses the
// NodePorts answer on, never loopback) ending with tail, each behind a
// lookup in the plain set of counted NodePorts: packets to other ports
// pay one hash lookup, not the local-address check.
func nodePortCountRules(fc *familyConfig, comment string, tail ...ruleset.Expr) []ruleset.Rule {
	guard := ruleset.Lookup{Key: keyNodePort, Set: setNodePortCounted}
	out := nodePortRules(fc, tail...)
	for i := range out {
		out[i].Exprs = append([]ruleset.Expr{guard}, out[i].Exprs...)
		out[i].Comment = comment
	}
	return out
}

// countTraffic adds one address of the port to both counter sets.
func countTraffic(fc *familyConfig, v *portView, o *portObjects, ip netip.Addr) {
	if !fc.serviceTraffic {
		return
	}
	c := metrics.ServiceTrafficComment(v.sp.Name.Namespace, v.sp.Name.Name, v.sp.Name.Port, v.sp.Port)
	for _, set := range nftCounterSets {
		e := dstElement(ip, v, nil)
		e.Counter = &ruleset.ElementCounter{Comment: c}
		o.add(set, e)
	}
}

// countNodePort adds the port's NodePort to the NodePort counter sets.
func countNodePort(fc *familyConfig, v *portView, o *portObjects) {
	if !fc.serviceTraffic || v.sp.NodePort == 0 {
		return
	}
	c := metrics.ServiceTrafficComment(v.sp.Name.Namespace, v.sp.Name.Name, v.sp.Name.Port, v.sp.Port)
	o.add(setNodePortCounted, portElement(v, nil))
	for _, set := range []string{setNodePortTraffic, setNodePortConnections} {
		e := portElement(v, nil)
		e.Counter = &ruleset.ElementCounter{Comment: c}
		o.add(set, e)
	}
}

// ServiceTraffic implements metrics.ServiceTrafficSource: one dump of each
// counter set of each family's table, read now.
func (b *Backend) ServiceTraffic(ctx context.Context) ([]metrics.ServiceTrafficSample, error) {
	var out []metrics.ServiceTrafficSample
	for _, f := range b.families {
		if !f.fc.serviceTraffic {
			continue
		}
		at := map[string]int{} // element key -> sample
		for _, s := range trafficSets(f.fc) {
			err := b.conn.ReadElements(ctx, f.fc.nft, TableName, s, func(e *ruleset.Element) {
				out = addCounted(out, at, f.fc, s.Name, e, e.KeyText(s))
			})
			if err != nil {
				return nil, fmt.Errorf("service traffic counters: %w", err)
			}
		}
	}
	return out, nil
}

// addCounted adds one element's counts to the sample of its address.
func addCounted(out []metrics.ServiceTrafficSample, at map[string]int, fc *familyConfig, set string, e *ruleset.Element, key string) []metrics.ServiceTrafficSample {
	if e.Counter == nil || len(e.Key) < 2 {
		return out
	}
	proto := e.Key[0] // NodePort sets: l4proto . port
	if len(e.Key) == 3 {
		proto = e.Key[1] // address sets: daddr . l4proto . port
	}
	i, ok := at[key]
	if !ok {
		ns, svc, port, ok := metrics.ParseServiceTrafficComment(e.Counter.Comment)
		if !ok {
			return out // not ours
		}
		i = len(out)
		at[key] = i
		out = append(out, metrics.ServiceTrafficSample{Namespace: ns, Service: svc, Port: port,
			Protocol: protocolName(uint8(proto.Num)), Family: metrics.Family(fc.family)})
	}
	if set == setServiceConnections || set == setNodePortConnections {
		out[i].Connections = e.Counter.Packets
	} else {
		out[i].Packets, out[i].Bytes = e.Counter.Packets, e.Counter.Bytes
	}
	return out
}

// protocolName is the Service protocol of an IP protocol number.
func protocolName(p uint8) string {
	for _, proto := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP} {
		if n, _ := ProtocolNumber(proto); n == p {
			return string(proto)
		}
	}
	return fmt.Sprint(p)
}
