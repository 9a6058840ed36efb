package nftables

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// portObjects is what one service port contributes to a family's table:
// its own chains, elements of the shared sets and maps, and the endpoint
// order of each of its groups.
type portObjects struct {
	chains   []*ruleset.Chain
	elements map[string][]ruleset.Element
	orders   map[groupKey][]netip.AddrPort
}

func (o *portObjects) add(set string, els ...ruleset.Element) {
	o.elements[set] = append(o.elements[set], els...)
}

// portView is a service port reduced to one family, with its selection.
type portView struct {
	sp           *proxier.ServicePort
	proto        uint8
	clusterIP    netip.Addr
	externalIPs  []netip.Addr
	lbIPs        []netip.Addr
	sourceRanges []netip.Prefix
	sel          proxier.EndpointSelection
	chains       portChains
}

func (v *portView) externallyAccessible() bool {
	return v.sp.NodePort != 0 || len(v.externalIPs) > 0 || len(v.lbIPs) > 0
}

// groupsOf lists the endpoint groups a service port uses.
func groupsOf(sp *proxier.ServicePort) []groupKey {
	var out []groupKey
	if sp.UsesClusterEndpoints() {
		out = append(out, groupKey{name: sp.Name})
	}
	if sp.UsesLocalEndpoints() {
		out = append(out, groupKey{name: sp.Name, local: true})
	}
	return out
}

// portRenderer renders service ports of one family. It is pure: group
// identifiers and previous endpoint orders are inputs.
type portRenderer struct {
	fc     *familyConfig
	node   proxier.NodeInfo
	ids    *groupIDs
	orders map[groupKey][]netip.AddrPort
}

// view reduces a service port to the family, or returns nil when it has
// nothing in it (no cluster IP of the family, or an unusable protocol).
func (r *portRenderer) view(sp *proxier.ServicePort, eps []proxier.Endpoint) *portView {
	p, ok := protoNumber(sp.Protocol)
	cip, hasIP := sp.ClusterIP(r.fc.family)
	if !ok || !hasIP || !cip.IsValid() || sp.Port == 0 {
		return nil
	}
	return &portView{
		sp: sp, proto: p, clusterIP: cip.Unmap(),
		externalIPs:  familyAddrs(sp.ExternalIPs, r.fc.family),
		lbIPs:        familyAddrs(sp.LoadBalancerIPs, r.fc.family),
		sourceRanges: proxier.PrefixesOfFamily(sp.LoadBalancerSourceRanges, r.fc.family),
		sel:          proxier.SelectEndpoints(sp, validEndpoints(eps), r.node, r.fc.family),
		chains:       chainsOf(sp.Name),
	}
}

// render gives the port's objects; nil when it has nothing in the family.
func (r *portRenderer) render(sp *proxier.ServicePort, eps []proxier.Endpoint) *portObjects {
	v := r.view(sp, eps)
	if v == nil {
		return nil
	}
	o := &portObjects{elements: map[string][]ruleset.Element{}, orders: map[groupKey][]netip.AddrPort{}}
	cluster := r.group(v, o, groupKey{name: sp.Name}, v.sel.Cluster)
	local := r.group(v, o, groupKey{name: sp.Name, local: true}, v.sel.Local)
	r.dispatch(v, o)
	o.chains = append(o.chains, r.serviceChain(v, cluster, local))
	if v.externallyAccessible() {
		o.chains = append(o.chains, r.externalChain(v, cluster, local))
	}
	if fw := r.firewallChain(v); fw != nil {
		o.chains = append(o.chains, fw)
		for _, ip := range v.lbIPs {
			o.add(setFirewallIPs, dstElement(ip, v, gotoV(fw.Name)))
		}
	}
	for _, ep := range v.sel.AllReachable {
		a := ep.IP.Unmap()
		o.add(setHairpin, ruleset.Element{Key: []ruleset.Value{{Addr: a}, {Addr: a}}})
	}
	return o
}

// group writes a group's map elements and returns the statement that
// DNATs to it, or nil when the port does not use the group.
func (r *portRenderer) group(v *portView, o *portObjects, k groupKey, eps []proxier.Endpoint) ruleset.Expr {
	id, ok := r.ids.lookup(k)
	if !ok {
		return nil
	}
	order := arrange(r.orders[k], eps)
	o.orders[k] = order
	o.add(endpointMap(id), groupElements(id, order)...)
	d := ruleset.DNAT{Map: endpointMap(id), Offset: groupOffset(id)}
	if t := v.sp.AffinityTimeoutSeconds; t > 0 {
		return ruleset.AffinityDNAT{DNAT: d, Affinity: setAffinity, Timeout: uint32(t)}
	}
	return d
}

// dispatch adds the port's entries to the service maps, and to the
// no-endpoint sets when it has no usable endpoint at all.
func (r *portRenderer) dispatch(v *portView, o *portObjects) {
	o.add(setServiceIPs, dstElement(v.clusterIP, v, gotoV(v.chains.service)))
	for _, ip := range append(append([]netip.Addr(nil), v.externalIPs...), v.lbIPs...) {
		o.add(setServiceIPs, dstElement(ip, v, gotoV(v.chains.external)))
	}
	if v.sp.NodePort != 0 {
		o.add(setServiceNodePorts, portElement(v, gotoV(v.chains.external)))
	}
	if v.sel.HasAny {
		return
	}
	o.add(setNoEndpoints, dstElement(v.clusterIP, v, nil))
	for _, ip := range append(append([]netip.Addr(nil), v.externalIPs...), v.lbIPs...) {
		o.add(setNoEndpoints, dstElement(ip, v, nil))
	}
	if v.sp.NodePort != 0 {
		o.add(setNoEndpointPorts, portElement(v, nil))
	}
}

func gotoV(chain string) *ruleset.Verdict { return &ruleset.Verdict{Kind: "goto", Chain: chain} }

func dstElement(ip netip.Addr, v *portView, vd *ruleset.Verdict) ruleset.Element {
	return ruleset.Element{Key: []ruleset.Value{{Addr: ip}, {Num: uint32(v.proto)}, {Num: uint32(v.sp.Port)}}, Verdict: vd}
}

func portElement(v *portView, vd *ruleset.Verdict) ruleset.Element {
	return ruleset.Element{Key: []ruleset.Value{{Num: uint32(v.proto)}, {Num: uint32(v.sp.NodePort)}}, Verdict: vd}
}

func protoNumber(p v1.Protocol) (uint8, bool) {
	switch p {
	case v1.ProtocolTCP:
		return ruleset.ProtoTCP, true
	case v1.ProtocolUDP:
		return ruleset.ProtoUDP, true
	case v1.ProtocolSCTP:
		return ruleset.ProtoSCTP, true
	}
	return 0, false
}

func familyAddrs(addrs []netip.Addr, family v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if a.IsValid() && proxier.FamilyOf(a) == family {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// validEndpoints drops endpoints no element can be written for.
func validEndpoints(eps []proxier.Endpoint) []proxier.Endpoint {
	out := eps[:0:0]
	for _, e := range eps {
		if e.IP.IsValid() && e.Port != 0 {
			out = append(out, e)
		}
	}
	return out
}
