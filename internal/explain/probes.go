package explain

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Address kinds of a service port.
const (
	KindClusterIP    = "cluster IP"
	KindNodePort     = "NodePort"
	KindExternalIP   = "external IP"
	KindLoadBalancer = "load-balancer IP"
)

// Outsider is the source of probes from outside the cluster: an address
// of TEST-NET-3 (RFC 5737), or its IPv6 documentation counterpart.
var (
	Outsider4 = netip.MustParseAddr("203.0.113.1")
	Outsider6 = netip.MustParseAddr("2001:db8::1")
)

// Check is one address of a service port, the probe sent to it and the
// endpoints the API says it must reach.
type Check struct {
	Kind   string
	Family v1.IPFamily
	Probe  Probe
	// Want are the endpoints a new connection may reach; none means
	// the kernel must refuse it.
	Want []netip.AddrPort
	// Policy says which selection Want comes from.
	Policy string
	// WantAffinity is the Service's ClientIP affinity timeout in
	// seconds; 0 for none.
	WantAffinity int
}

// Env is what probes need of the node.
type Env struct {
	// Local are the node's addresses (LocalAddrs of the dataplane).
	Local []netip.Addr
	// Node is the node as the daemon knows it.
	Node proxier.NodeInfo
	// InInterface names the interface a packet from src arrives on;
	// nil or "" when unknown.
	InInterface func(src netip.Addr) string
	// NodePortAddresses are where NodePorts answer (Objects'); none of a
	// family: every address of it.
	NodePortAddresses []netip.Prefix
}

// Checks lists the checks of one service port in one family: its cluster
// IP from the node, its NodePort on the node's address and its external
// and load-balancer IPs from outside.
func Checks(ep ExpectedPort, fam v1.IPFamily, env Env) []Check {
	sp, sel := ep.Port, ep.Selections[fam]
	var out []Check
	if ip, ok := sp.ClusterIP(fam); ok {
		c := Check{Kind: KindClusterIP, Family: fam, Want: keys(sel.Internal(sp)), Policy: policyName("internal", sp.InternalPolicyLocal)}
		c.Probe = env.fromNode(fam, ip, sp)
		out = append(out, c)
	}
	ext, extPolicy := keys(sel.External(sp)), policyName("external", sp.ExternalPolicyLocal)
	if node, ok := env.nodePortAddr(fam); ok && sp.NodePort != 0 {
		p := env.fromOutside(fam, node, sp.NodePort, sp)
		out = append(out, Check{Kind: KindNodePort, Family: fam, Probe: p, Want: ext, Policy: extPolicy})
	}
	for _, ip := range proxier.AddrsOfFamily(sp.ExternalIPs, fam) {
		out = append(out, Check{Kind: KindExternalIP, Family: fam, Probe: env.fromOutside(fam, ip, sp.Port, sp), Want: ext, Policy: extPolicy})
	}
	for _, ip := range proxier.AddrsOfFamily(sp.LoadBalancerIPs, fam) {
		p := env.fromOutside(fam, ip, sp.Port, sp)
		if src, ok := allowedSource(sp, fam); ok {
			p.Src = src
		}
		out = append(out, Check{Kind: KindLoadBalancer, Family: fam, Probe: p, Want: ext, Policy: extPolicy})
	}
	for i := range out {
		out[i].WantAffinity = int(sp.AffinityTimeoutSeconds)
	}
	return out
}

func policyName(which string, local bool) string {
	if local {
		return which + "TrafficPolicy Local"
	}
	return which + "TrafficPolicy Cluster"
}

// fromNode is a connection the node opens from its own address.
func (env Env) fromNode(fam v1.IPFamily, dst netip.Addr, sp *proxier.ServicePort) Probe {
	src, ok := env.nodeAddr(fam)
	if !ok {
		src = netip.IPv6Loopback()
		if fam == v1.IPv4Protocol {
			src = netip.MustParseAddr("127.0.0.1")
		}
	}
	return Probe{Src: src, Dst: dst, Port: sp.Port, Protocol: sp.Protocol, FromNode: true}
}

// fromOutside is a connection from a client outside the cluster.
func (env Env) fromOutside(fam v1.IPFamily, dst netip.Addr, port uint16, sp *proxier.ServicePort) Probe {
	src := Outsider4
	if fam == v1.IPv6Protocol {
		src = Outsider6
	}
	p := Probe{Src: src, Dst: dst, Port: port, Protocol: sp.Protocol}
	if env.InInterface != nil {
		p.InInterface = env.InInterface(src)
	}
	return p
}

// nodeAddr is the node's first address of the family: from its Node
// object, else the first local one that is not loopback.
func (env Env) nodeAddr(fam v1.IPFamily) (netip.Addr, bool) {
	return env.firstAddr(fam, func(netip.Addr) bool { return true })
}

// nodePortAddr is the node's first address of the family that NodePorts
// answer on.
func (env Env) nodePortAddr(fam v1.IPFamily) (netip.Addr, bool) {
	allowed := proxier.PrefixesOfFamily(env.NodePortAddresses, fam)
	return env.firstAddr(fam, func(a netip.Addr) bool {
		return len(allowed) == 0 || slices.ContainsFunc(allowed, func(p netip.Prefix) bool { return p.Contains(a) })
	})
}

func (env Env) firstAddr(fam v1.IPFamily, ok func(netip.Addr) bool) (netip.Addr, bool) {
	for _, list := range [][]netip.Addr{env.Node.Addresses, env.Local} {
		for _, a := range proxier.AddrsOfFamily(list, fam) {
			if !a.IsLoopback() && !a.IsLinkLocalUnicast() && ok(a) {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// allowedSource is an address loadBalancerSourceRanges let in.
func allowedSource(sp *proxier.ServicePort, fam v1.IPFamily) (netip.Addr, bool) {
	for _, p := range proxier.PrefixesOfFamily(sp.LoadBalancerSourceRanges, fam) {
		a := p.Masked().Addr()
		if p.Bits() < a.BitLen() {
			a = a.Next()
		}
		return a, true
	}
	return netip.Addr{}, false
}

// String gives e.g. "10.96.0.10:80/TCP".
func (p Probe) String() string {
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(p.Dst, p.Port), p.Protocol)
}
