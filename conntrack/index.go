package conntrack

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// IP protocol numbers as conntrack reports them.
const (
	protoTCP  uint8 = 6
	protoUDP  uint8 = 17
	protoSCTP uint8 = 132
)

// flowKey is what conntrack keeps of a flow's original destination:
// protocol, address and port. It names one service address.
type flowKey struct {
	proto uint8
	addr  netip.Addr
	port  uint16
}

// newFlowKey normalises a key: IPv4-mapped addresses unmapped.
func newFlowKey(proto uint8, addr netip.Addr, port uint16) flowKey {
	return flowKey{proto: proto, addr: addr.Unmap(), port: port}
}

// target is what may answer traffic sent to one service address.
type target struct {
	// allowed are the reply sources (endpoint address and port) that
	// traffic to the address may be NATed to now.
	allowed map[netip.AddrPort]struct{}
	// gone is set when no service uses the address any more: every entry
	// for it is stale.
	gone bool
}

// serviceIndex maps service addresses to their targets, for one family.
type serviceIndex map[flowKey]*target

// keySet is the set of service addresses (all families) of a State,
// compared between syncs to find addresses that disappeared.
type keySet map[flowKey]struct{}

// protoNumber returns the conntrack protocol number of a service protocol
// the reconciler handles, or false for TCP and anything else.
func protoNumber(p v1.Protocol) (uint8, bool) {
	switch p {
	case v1.ProtocolUDP:
		return protoUDP, true
	case v1.ProtocolSCTP:
		return protoSCTP, true
	}
	return 0, false
}

// forEachKey calls fn with every service address of a UDP or SCTP sp in
// the family (forEachAddress); TCP ports have none.
func forEachKey(sp *proxier.ServicePort, family v1.IPFamily, nodeIPs []netip.Addr, fn func(flowKey)) {
	if proto, ok := protoNumber(sp.Protocol); ok {
		forEachAddress(sp, proto, family, nodeIPs, fn)
	}
}

// forEachAddress calls fn with every service address of sp in the
// family, as keys of protocol proto: cluster, external and load-balancer
// IPs with the service port, and the node addresses with the NodePort.
func forEachAddress(sp *proxier.ServicePort, proto uint8, family v1.IPFamily, nodeIPs []netip.Addr, fn func(flowKey)) {
	for _, list := range [][]netip.Addr{sp.ClusterIPs, sp.ExternalIPs, sp.LoadBalancerIPs} {
		for _, ip := range list {
			if proxier.FamilyOf(ip) == family {
				fn(newFlowKey(proto, ip, sp.Port))
			}
		}
	}
	if sp.NodePort == 0 {
		return
	}
	for _, ip := range nodeIPs {
		if proxier.FamilyOf(ip) == family {
			fn(newFlowKey(proto, ip, sp.NodePort))
		}
	}
}

// serviceKeys collects the UDP/SCTP service addresses of st in the
// families.
func serviceKeys(st *proxier.State, families []v1.IPFamily, nodeIPs []netip.Addr) keySet {
	keys := keySet{}
	for _, sp := range st.Services {
		for _, fam := range families {
			forEachKey(sp, fam, nodeIPs, func(k flowKey) { keys[k] = struct{}{} })
		}
	}
	return keys
}

// buildIndex computes, for one family, the endpoints each service address
// may reach now, and marks the addresses in gone (service addresses of
// earlier syncs) that no current service uses.
func buildIndex(st *proxier.State, family v1.IPFamily, nodeIPs []netip.Addr, gone keySet) serviceIndex {
	ix := serviceIndex{}
	for name, sp := range st.Services {
		if _, ok := protoNumber(sp.Protocol); !ok {
			continue
		}
		sel := proxier.SelectEndpoints(sp, st.Endpoints[name], st.Node, family)
		forEachKey(sp, family, nodeIPs, func(k flowKey) {
			t := ix[k]
			if t == nil {
				t = &target{allowed: map[netip.AddrPort]struct{}{}}
				ix[k] = t
			}
			for _, ep := range sel.AllReachable {
				t.allowed[replySource(k.proto, ep.IP, ep.Port)] = struct{}{}
			}
		})
	}
	for k := range gone {
		if _, used := ix[k]; !used && proxier.FamilyOf(k.addr) == family {
			ix[k] = &target{gone: true}
		}
	}
	return ix
}

// replySource normalises an endpoint as conntrack shows it in the reply
// direction.
func replySource(proto uint8, addr netip.Addr, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(addr.Unmap(), port)
}

// isStale decides one flow. Flows that are not UDP/SCTP, or not addressed
// to a service address, are never stale.
func (ix serviceIndex) isStale(f *flowTuple) bool {
	if f.proto != protoUDP && f.proto != protoSCTP {
		return false
	}
	k := newFlowKey(f.proto, f.origDst.Addr(), f.origDst.Port())
	t := ix[k]
	switch {
	case t == nil:
		return false
	case t.gone:
		return true
	}
	src := replySource(f.proto, f.replySrc.Addr(), f.replySrc.Port())
	if len(t.allowed) == 0 {
		// No endpoints: an entry that was never NATed stands for traffic
		// that was rejected or found no rule, which is still right. One
		// NATed to an endpoint points at an endpoint that left.
		return src != netip.AddrPortFrom(k.addr, k.port)
	}
	_, ok := t.allowed[src]
	return !ok
}
