package flowtest

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Shape is a node's IP families, as the daemon decides them: the table
// runs on single-stack IPv4, single-stack IPv6 and dual-stack nodes.
type Shape struct {
	Name     string
	Families []v1.IPFamily // primary first
}

// Shapes are the node shapes the table runs in. With Variants' "none"
// detector (ClusterCIDR mode, no cluster CIDR), "dual" is a dual-stack
// node without any cluster CIDR.
func Shapes() []Shape {
	return []Shape{
		{"ipv4", []v1.IPFamily{v1.IPv4Protocol}},
		{"ipv6", []v1.IPFamily{v1.IPv6Protocol}},
		{"dual", []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}},
		{"dual, IPv6 primary", []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}},
	}
}

func (s Shape) has(f v1.IPFamily) bool { return slices.Contains(s.Families, f) }

// ipv6Prefix names the IPv6 twin of an IPv4 case.
const ipv6Prefix = "IPv6: "

// ShapeFixture is the fixture of a cluster whose Services are all
// dual-stack (each IPv4 address has its IPv6 twin, see to6), plus the
// single-stack IPv6 Service "web6", as a node of shape s sees it after
// the proxier's family filter: endpoints of families the node does not
// program are gone, and so is a Service of such a family only, but a
// dual-stack Service keeps both cluster IPs (the backend must ignore the
// other family's).
func ShapeFixture(s Shape, v Variant) (*proxier.State, NodeConfig) {
	base, node := FixtureFor(v)
	delete(base.Services, spn("web6", "http", v1.ProtocolTCP))
	delete(base.Endpoints, spn("web6", "http", v1.ProtocolTCP))
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{}, Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{}}
	for name, sp := range base.Services {
		twin := *sp
		twin.ClusterIPs = sixAll(sp.ClusterIPs, true)
		twin.ExternalIPs = sixAll(sp.ExternalIPs, true)
		twin.LoadBalancerIPs = sixAll(sp.LoadBalancerIPs, true)
		twin.LoadBalancerSourceRanges = slices.Concat(sp.LoadBalancerSourceRanges, mapSlice(sp.LoadBalancerSourceRanges, to6Prefix))
		st.Services[name] = &twin
		var eps []proxier.Endpoint
		for _, e := range base.Endpoints[name] {
			e6 := e
			e6.IP = to6(e.IP)
			eps = append(eps, keepFamily(s, e)...)
			eps = append(eps, keepFamily(s, e6)...)
		}
		st.Endpoints[name] = eps
	}
	addSingleStackServices(fixture{st}, s)
	node.Families = slices.Clone(s.Families)
	node.NodeIPs, st.Node = nil, base.Node
	st.Node.Addresses, st.Node.PodCIDRs = nil, nil
	for _, f := range s.Families {
		node.NodeIPs = append(node.NodeIPs, proxier.AddrsOfFamily(addrs(nodeIPv4, nodeIPv6), f)...)
		st.Node.Addresses = append(st.Node.Addresses, proxier.AddrsOfFamily(base.Node.Addresses, f)...)
		st.Node.PodCIDRs = append(st.Node.PodCIDRs, proxier.PrefixesOfFamily(base.Node.PodCIDRs, f)...)
	}
	return st, node
}

// addSingleStackServices adds a single-stack Service of each family the
// node programs ("web4", "web6"): in a dual-stack cluster a Service may
// be of one family only, and a node of the other family never gets it.
func addSingleStackServices(f fixture, s Shape) {
	if s.has(v1.IPv4Protocol) {
		sp := clusterIPPort("web4", "http", v1.ProtocolTCP, "10.96.0.91", 80)
		sp.NodePort = 30091
		f.add(sp, ep("10.244.1.92", 8080, thisNode, ready), ep("10.244.2.93", 8080, otherNode, ready))
	}
	if s.has(v1.IPv6Protocol) {
		sp := clusterIPPort("web6", "http", v1.ProtocolTCP, "fd00:10:96::95", 80)
		sp.NodePort = 30095
		f.add(sp, ep("fd00:10:244:1::96", 8080, thisNode, ready), ep("fd00:10:244:2::97", 8080, otherNode, ready))
	}
}

// singleStackCases are the rows of addSingleStackServices' Services.
func singleStackCases(s Shape, v Variant) []Case {
	var out []Case
	add := func(fam, cip string, nodePort uint16, node, client, outside string, eps ...string) {
		out = append(out,
			row("single-stack "+fam+" service: pod to cluster IP", packet(client, v.PodInterface, cip, 80), reach(eps...)),
			row("single-stack "+fam+" service: outside client to NodePort", packet(outside, uplink, node, nodePort), masq(eps...)),
			row("single-stack "+fam+" service: cluster IP on a port it does not have", packet(client, v.PodInterface, cip, 81), nothing()))
	}
	if s.has(v1.IPv4Protocol) {
		add("IPv4", "10.96.0.91", 30091, nodeIPv4, podClient, outsider, "10.244.1.92:8080", "10.244.2.93:8080")
	}
	if s.has(v1.IPv6Protocol) {
		add("IPv6", "fd00:10:96::95", 30095, nodeIPv6, podClient6, outsider6, "[fd00:10:244:1::96]:8080", "[fd00:10:244:2::97]:8080")
	}
	for i := range out {
		out[i].Packet.Name = out[i].Name
	}
	return out
}

// sixAll is addrs with each one's IPv6 twin after it (withV4: keep the
// IPv4 ones too).
func sixAll(as []netip.Addr, withV4 bool) []netip.Addr {
	var out []netip.Addr
	if withV4 {
		out = append(out, as...)
	}
	return append(out, mapSlice(as, to6)...)
}

func keepFamily(s Shape, e proxier.Endpoint) []proxier.Endpoint {
	if s.has(proxier.FamilyOf(e.IP)) {
		return []proxier.Endpoint{e}
	}
	return nil
}

func mapSlice[T any](in []T, f func(T) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, x := range in {
		out[i] = f(x)
	}
	return out
}

// ShapeCases is the table for a node of shape s under variant v: the
// IPv4 cases when it programs IPv4, their IPv6 twins (named "IPv6: ...")
// and the single-stack IPv6 Service's cases when it programs IPv6, and
// for a single-stack node, packets of the other family to the dual-stack
// Services' addresses, which nothing may answer.
func ShapeCases(s Shape, v Variant) []Case {
	var v4 []Case
	for _, c := range CasesFor(v) {
		if c.Packet.DstIP.Is4() { // Fixture's own IPv6 rows are replaced by singleStackCases
			v4 = append(v4, c)
		}
	}
	out := singleStackCases(s, v)
	sample := slices.DeleteFunc(slices.Clone(v4), func(c Case) bool { return !otherFamilySample[c.Name] })
	if s.has(v1.IPv4Protocol) {
		out = append(out, v4...)
	} else {
		out = append(out, otherFamilyCases(sample, "IPv4")...)
	}
	if s.has(v1.IPv6Protocol) {
		out = append(out, mapSlice(v4, sixCase)...)
	} else {
		out = append(out, otherFamilyCases(mapSlice(sample, sixCase), "IPv6")...)
	}
	return out
}

// otherFamilySample names the cases whose packets a single-stack node
// gets in the other family: every kind of service address.
var otherFamilySample = map[string]bool{
	"pod to cluster IP reaches every ready endpoint, unmasqueraded": true,
	"outside client to NodePort on the node IP":                     true,
	"outside client to external IP":                                 true,
	"outside client to load-balancer IP":                            true,
}

// otherFamilyCases: the same packets, on a node that does not program
// their family, go through untouched.
func otherFamilyCases(cs []Case, fam string) []Case {
	out := make([]Case, len(cs))
	for i, c := range cs {
		c.Name = fmt.Sprintf("not programmed (%s): %s", fam, strings.TrimPrefix(c.Name, ipv6Prefix))
		c.Expect = nothing()
		out[i] = c
	}
	return out
}

// sixCase is an IPv4 case's IPv6 twin: every address and endpoint
// translated by to6.
func sixCase(c Case) Case {
	c.Name = ipv6Prefix + c.Name
	c.Packet.SrcIP, c.Packet.DstIP = to6(c.Packet.SrcIP), to6(c.Packet.DstIP)
	c.Packet.Name = c.Name
	c.Expect = sixExpect(c.Expect)
	if c.ByDetector != nil {
		c.ByDetector = maps.Clone(c.ByDetector)
		for k, e := range c.ByDetector {
			c.ByDetector[k] = sixExpect(e)
		}
	}
	return c
}

func sixExpect(e Expect) Expect {
	e.Endpoints = mapSlice(e.Endpoints, func(s string) string {
		ap := netip.MustParseAddrPort(s)
		return netip.AddrPortFrom(to6(ap.Addr()), ap.Port()).String()
	})
	return e
}

// RunShapes runs the table per node shape and per local-traffic
// detector: build must return a model of the backend built from the
// NodeConfig (its Families among the rest) and synced with the State.
// Deviations name IPv4 cases; they apply to their IPv6 twins too.
func RunShapes(t *testing.T, build func(t *testing.T, state *proxier.State, node NodeConfig) Model, deviations ...Deviation) {
	t.Helper()
	var all []Deviation
	for _, d := range deviations {
		d6 := d
		d6.Case, d6.Expect = ipv6Prefix+d.Case, sixExpect(d.Expect)
		all = append(all, d, d6)
	}
	for _, s := range Shapes() {
		for _, v := range Variants() {
			t.Run(s.Name+"/"+v.Name, func(t *testing.T) {
				state, node := ShapeFixture(s, v)
				runCases(t, v, ShapeCases(s, v), build(t, state, node), all, false)
			})
		}
	}
}
