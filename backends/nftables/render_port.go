package nftables

import (
	"fmt"
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
	sets     []*ruleset.Set // its own sets (session affinity)
	elements map[string][]ruleset.Element
	orders   []groupOrder
	// tags are its chains' tags (none for a port with session affinity).
	tags map[string]*ruleset.ChainTag
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

// portRenderer renders service ports of one family. It is pure: group
// identifiers and previous endpoint orders are inputs.
type portRenderer struct {
	fc     *familyConfig
	node   proxier.NodeInfo
	local  proxier.LocalMatch
	ids    *groupIDs
	orders groupOrders // previous orders, read only
}

// view reduces a service port to the family, or returns nil when it has
// nothing in it (no cluster IP of the family, or an unusable protocol).
func (r *portRenderer) view(sp *proxier.ServicePort, eps []proxier.Endpoint) *portView {
	if !r.fc.serves(sp) {
		return nil
	}
	p, _ := ProtocolNumber(sp.Protocol)
	cip, _ := sp.ClusterIP(r.fc.family)
	return &portView{
		sp: sp, proto: p, clusterIP: cip.Unmap(),
		externalIPs:  proxier.AddrsOfFamily(sp.ExternalIPs, r.fc.family),
		lbIPs:        proxier.AddrsOfFamily(sp.LoadBalancerIPs, r.fc.family),
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
	o := &portObjects{elements: map[string][]ruleset.Element{}}
	cluster := r.group(v, o, groupKey{name: sp.Name}, v.sel.Cluster)
	local := r.group(v, o, groupKey{name: sp.Name, local: true}, v.sel.Local)
	r.dispatch(v, o)
	o.chains = append(o.chains, serviceChain(v, cluster, local))
	if v.externallyAccessible() {
		o.chains = append(o.chains, externalChain(v, r.local, cluster, local))
	}
	if fw := firewallChain(v); fw != nil {
		o.chains = append(o.chains, fw)
		for _, ip := range v.lbIPs {
			o.add(setFirewallIPs, dstElement(ip, v, gotoV(fw.Name)))
		}
	}
	for _, ep := range v.sel.AllReachable {
		a := ep.IP.Unmap()
		o.add(setHairpin, ruleset.Element{Key: []ruleset.Value{{Addr: a}, {Addr: a}}})
	}
	r.tag(v, o)
	return o
}

// tag gives each element whose verdict goes to one of the port's chains
// that chain's tag, which a restart reads back to leave the chain alone
// when it holds what it renders. A port with session affinity has none:
// its rules follow its endpoints, so its elements would be rewritten at
// every endpoint change; a restart rewrites its chains instead.
func (r *portRenderer) tag(v *portView, o *portObjects) {
	if v.sp.AffinityTimeoutSeconds > 0 {
		return
	}
	o.tags = make(map[string]*ruleset.ChainTag, len(o.chains))
	for _, ch := range o.chains {
		o.tags[ch.Name] = ruleset.TagOf(r.fc.nft, ch.Rules)
	}
	for _, set := range []string{setServiceIPs, setServiceNodePorts, setFirewallIPs} {
		els := o.elements[set]
		for i := range els {
			if vd := els[i].Verdict; vd != nil {
				els[i].Tag = o.tags[vd.Chain]
			}
		}
	}
}

// picker writes the rules that DNAT to one endpoint group, each starting
// with the given matches; nil when the port does not use the group.
type picker func(match ...ruleset.Expr) []ruleset.Rule

// group writes a group's map elements and returns its picker: one rule
// drawing a slot of the group's range in its shared map. Ports with
// ClientIP session affinity pick with rules instead (affinityPicker).
func (r *portRenderer) group(v *portView, o *portObjects, k groupKey, eps []proxier.Endpoint) picker {
	id, ok := r.ids.lookup(k)
	if !ok {
		return nil
	}
	if v.sp.AffinityTimeoutSeconds > 0 {
		return r.affinityPicker(v, o, eps)
	}
	order := arrange(r.orders.get(id), eps)
	o.orders = append(o.orders, groupOrder{id, order})
	o.add(r.ids.mapOf(id), groupElements(r.ids.offset(id), order)...)
	dnat := ruleset.DNAT{Map: r.ids.mapOf(id), Offset: r.ids.offset(id),
		Group: ruleset.GroupRef{ID: id, Width: r.ids.perMap, Local: k.local}}
	return func(match ...ruleset.Expr) []ruleset.Rule {
		return []ruleset.Rule{ruleset.R(append(withProto(v, match), dnat)...)}
	}
}

func withProto(v *portView, match []ruleset.Expr) []ruleset.Expr {
	return append(append([]ruleset.Expr{}, match...), proto(v.proto))
}

// affinityPicker implements ClientIP session affinity as kube-proxy does:
// each endpoint has a set of the clients it served, refreshed on every
// new connection with the service's timeout; a known client goes back to
// its endpoint, a new one is drawn with probability 1/n, 1/(n-1), ..., 1
// (uniform) and recorded. The endpoints are in the rules here, so
// endpoint changes of these ports rewrite rules; a removed endpoint's set
// goes with it, so no client is sent to it any more.
func (r *portRenderer) affinityPicker(v *portView, o *portObjects, eps []proxier.Endpoint) picker {
	timeout := uint32(v.sp.AffinityTimeoutSeconds)
	var sets []string
	var targets []netip.AddrPort
	for _, e := range eps {
		ap := netip.AddrPortFrom(e.IP.Unmap(), e.Port)
		s := affinitySet(v.sp.Name, ap, timeout)
		o.addSet(s)
		sets, targets = append(sets, s.Name), append(targets, ap)
	}
	return func(match ...ruleset.Expr) []ruleset.Rule {
		var known, drawn []ruleset.Rule
		for i, ep := range targets {
			rec := ruleset.Update{Set: sets[i], Key: keyClient, Timeout: timeout}
			hit := append(withProto(v, match), ruleset.Lookup{Key: keyClient, Set: sets[i]}, rec, ruleset.DNATTo{Endpoint: ep})
			known = append(known, ruleset.R(hit...))
			draw := withProto(v, match)
			if left := len(targets) - i; left > 1 {
				draw = append(draw, ruleset.NumgenIs{Mod: uint32(left)})
			}
			draw = append(draw, rec, ruleset.DNATTo{Endpoint: ep})
			drawn = append(drawn, ruleset.R(draw...))
		}
		return append(known, drawn...)
	}
}

func affinitySet(n proxier.ServicePortName, ep netip.AddrPort, timeout uint32) *ruleset.Set {
	return &ruleset.Set{Name: affinitySetName(n, ep), Key: keyClient, Dynamic: true, Size: DefaultAffinitySize,
		Comment: fmt.Sprintf("clients of %s for ClientIP affinity (%ds)", ep, timeout)}
}

func (o *portObjects) addSet(s *ruleset.Set) {
	for _, have := range o.sets {
		if have.Name == s.Name {
			return
		}
	}
	o.sets = append(o.sets, s)
}

// addresses are the port's cluster IP, external IPs and LB IPs.
func (v *portView) addresses() []netip.Addr {
	out := append([]netip.Addr{v.clusterIP}, v.externalIPs...)
	return append(out, v.lbIPs...)
}

// dispatch adds the port's entries to the service maps, and to the
// no-endpoint sets when it has no usable endpoint at all.
func (r *portRenderer) dispatch(v *portView, o *portObjects) {
	for i, ip := range v.addresses() {
		countTraffic(r.fc, v, o, ip)
		target := v.chains.external
		if i == 0 {
			target = v.chains.service
			o.add(setClusterIPPorts, dstElement(ip, v, nil))
		}
		o.add(setServiceIPs, dstElement(ip, v, gotoV(target)))
	}
	countNodePort(r.fc, v, o)
	if v.sp.NodePort != 0 {
		o.add(setServiceNodePorts, portElement(v, gotoV(v.chains.external)))
	}
	if v.sel.HasAny {
		return
	}
	for _, ip := range v.addresses() {
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

// ProtocolNumber is a Service protocol's IP protocol number; false for
// a protocol switchyard does not program.
func ProtocolNumber(p v1.Protocol) (uint8, bool) {
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
